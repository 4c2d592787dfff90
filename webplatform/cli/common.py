"""What every `aat` command shares: exit codes, the common options, settings, answers.

`aat --help`, `aat --version` and a mistyped command import this module and nothing of the
store: settings and answers are imported by the functions that use them.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webplatform.config import Settings
    from webplatform.jobs.answers import Answer
    from webplatform.platform import Platform
    from webplatform.trust.door import Change
    from webplatform.trust.permissions import Permission

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def settings_from(ns: argparse.Namespace) -> Settings:
    """Settings from the environment, with `--registry` and `--db` applied on top."""
    from webplatform.config import get_settings

    overrides: dict[str, Any] = {}
    if getattr(ns, "registry", None):
        overrides["registry"] = ":".join(ns.registry)
    if getattr(ns, "db", None):
        overrides["db_url"] = ns.db
    if getattr(ns, "root_path", None) is not None:
        overrides["root_path"] = ns.root_path
    return get_settings(**overrides)


def port(text: str) -> int:
    """A TCP port number for `--port` (argparse reports the error in one line)."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1 to 65535)")
    return number


def add_common(p: argparse.ArgumentParser, *, registry: bool = True, db: bool = True) -> None:
    """Add `--registry` and `--db` to a command's parser."""
    if registry:
        p.add_argument(
            "--registry", action="append", metavar="DIR", help="registry root (repeatable)"
        )
    if db:
        p.add_argument("--db", metavar="URL", help="database URL (default: SQLite in AAT_HOME)")


def print_answer(answer: Answer) -> int:
    """Print an answer as JSON; the exit code it means."""
    from webplatform.jobs.answers import Status

    print(json.dumps(answer.to_dict(), indent=2, ensure_ascii=False))
    if answer.status is Status.invalid:
        return EXIT_USAGE
    return EXIT_FAILED if answer.is_error else EXIT_OK


def say_confinement(settings: Settings, command: str, *, after_s: float = 0.0) -> None:
    """Say on stderr, in one line, when tools cannot run fully confined here (SPEC §14, §17).

    The check starts a short-lived process, so it runs beside the start, not before it, and
    `after_s` seconds in (`aat mcp` answers its first message first, SPEC §13).
    """
    from webplatform.process import confine

    fence = confine.Fence.from_settings(settings)

    def check() -> None:
        time.sleep(after_s)
        note = confine.startup_note(fence)
        if note:
            print(f"{command}: {note}", file=sys.stderr, flush=True)

    threading.Thread(target=check, name="aat-confinement-check", daemon=True).start()


def notify_refusal(settings: Settings, command: str) -> int | None:
    """EXIT_USAGE after a one-line error if an `AAT_NOTIFY` URL is malformed; else None."""
    if not settings.notify_urls:
        return None
    from webplatform.notifications import check_urls

    try:
        check_urls(settings.notify_urls)
    except ValueError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return None


def step_up_refusal(
    platform: Platform,
    ns: argparse.Namespace,
    *,
    change: Change,
    bound_to: dict[str, str],
    permission: Permission,
    refused: str,
) -> int | None:
    """EXIT_USAGE unless `--by` names an operator who may `permission` and the password given
    (`--password-stdin`, or asked on the terminal) is theirs, checked through the trust door
    (`webplatform.trust.door`) bound to `change` of `bound_to`; None when admitted.
    `refused`: what the one-line refusal says the operator may not do."""
    import getpass

    from webplatform.trust import door
    from webplatform.trust.permissions import Decider, may

    said = f"aat {ns.command} {ns.op}"
    if not ns.by:
        print(f"{said}: say who you are: --by ADMIN", file=sys.stderr)
        return EXIT_USAGE
    password = (
        sys.stdin.readline().rstrip("\r\n")
        if ns.password_stdin
        else getpass.getpass(f"password for {ns.by}: ")
    )
    role = platform.operators.role_of(ns.by)
    try:
        door.verify(
            door.Terminal(platform),
            operator=ns.by,
            proof=door.Proof(password=password),
            bound=door.for_change(ns.by, change, bound_to),
            address=None,
        )
        admitted = may(Decider(name=ns.by, role=role), permission)
    except door.StepUpRefused:
        admitted = False
    if not admitted:
        print(f"{said}: refused: {ns.by!r} {refused}, or the password is wrong", file=sys.stderr)
        return EXIT_USAGE
    return None
