"""`aat rules list | add FILE | revoke ID | export`: rules decided in advance (SPEC §16).

Making or revoking a rule is an admin's, with their password as the step-up
(`--by ADMIN --password-stdin`), as on the dashboard's Rules page."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from webplatform.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, settings_from, step_up_refusal

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
    """EXIT_USAGE unless `--by` names an admin and the password given is theirs, as on the
    dashboard's Rules page (`step_up_refusal`)."""
    from webplatform.trust.door import Change
    from webplatform.trust.permissions import Permission

    return step_up_refusal(
        platform,
        ns,
        change=Change.rule_add if ns.op == "add" else Change.rule_revoke,
        bound_to={"target": str(ns.target)},
        permission=Permission.make_rules,
        refused="is not an admin",
    )
