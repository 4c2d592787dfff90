"""`aat rules list | add FILE | revoke ID | export`: rules decided in advance (SPEC §16).

Making or revoking a rule is an admin's, with their password as the step-up
(`--by ADMIN --password-stdin`), as on the dashboard's Rules page."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from webplatform.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, settings_from

if TYPE_CHECKING:
    from webplatform.platform import Platform


def cmd_rules(ns: argparse.Namespace, _extra: list[str]) -> int:
    """List, add, revoke or export rules; `add` prints one id per rule, one a line."""
    from webplatform.platform import Platform
    from webplatform.trust import rulebook
    from webplatform.trust.rules import RuleError

    platform = Platform(settings_from(ns))
    if ns.op in ("list", "export"):
        print(json.dumps(rulebook.listing(platform), indent=2))
        return EXIT_OK
    if not ns.target:
        what = "FILE (YAML, or .cedar)" if ns.op == "add" else "the rule's ID"
        print(f"aat rules {ns.op}: give {what}", file=sys.stderr)
        return EXIT_USAGE
    if (refused := _admin_refusal(platform, ns)) is not None:
        return refused
    try:
        if ns.op == "add":
            source = rulebook.Source.of_file(ns.target, _read(ns.target))
            for rule_id in rulebook.add(platform, rulebook.parse(source, platform), by=ns.by):
                print(rule_id)
        else:
            rulebook.revoke(platform, _rule_id(ns.target), by=ns.by)
            print(f"revoked rule {ns.target}", file=sys.stderr)
    except (RuleError, OSError) as exc:
        print(f"aat rules {ns.op}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _read(name: str) -> str:
    return sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")


def _rule_id(text: str) -> int:
    from webplatform.trust.rules import RuleError

    if not text.isdigit():
        raise RuleError(f"{text!r} is not a rule id: `aat rules list` shows them")
    return int(text)


def _admin_refusal(platform: Platform, ns: argparse.Namespace) -> int | None:
    """EXIT_USAGE unless `--by` names an admin and the password given is theirs: checked
    through the trust door (`webplatform.trust.door`), as on the dashboard's Rules page."""
    from webplatform.trust import door
    from webplatform.trust.permissions import Decider, Permission, may

    if not ns.by:
        print(f"aat rules {ns.op}: say who you are: --by ADMIN", file=sys.stderr)
        return EXIT_USAGE
    password = (
        sys.stdin.readline().rstrip("\r\n")
        if ns.password_stdin
        else getpass.getpass(f"password for {ns.by}: ")
    )
    role = platform.operators.role_of(ns.by)
    change = door.Change.rule_add if ns.op == "add" else door.Change.rule_revoke
    try:
        door.verify(
            door.Terminal(platform),
            operator=ns.by,
            proof=door.Proof(password=password),
            bound=door.for_change(ns.by, change, {"target": str(ns.target)}),
            address=None,
        )
        admitted = may(Decider(name=ns.by, role=role), Permission.make_rules)
    except door.StepUpRefused:
        admitted = False
    if not admitted:
        print(
            f"aat rules {ns.op}: refused: {ns.by!r} is not an admin, or the password is wrong",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return None
