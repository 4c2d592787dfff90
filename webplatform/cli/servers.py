"""`aat servers list | show NAME | accept NAME | import FILE`: upstream MCP servers (SPEC §22).

Accepting a server's new or changed tool definitions is an admin's, with their password as
the step-up (`--by ADMIN --password-stdin`), as making a rule is."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from webplatform.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, settings_from, step_up_refusal

if TYPE_CHECKING:
    from webplatform.platform import Platform


def cmd_servers(ns: argparse.Namespace, _extra: list[str]) -> int:
    """List, show, accept or import servers; each prints JSON (import: one path a line)."""
    from webplatform import servers
    from webplatform.platform import Platform

    settings = settings_from(ns)
    if ns.op == "import":
        return _import(ns, settings.registry_roots)
    platform = Platform(settings)
    cwd = Path.cwd()
    try:
        if ns.op == "list":
            found = [s.as_json() for s in servers.overview(platform, cwd)]
            print(json.dumps(found, indent=2, ensure_ascii=False))
            return EXIT_OK
        if not ns.target:
            print(f"aat servers {ns.op}: give the server's NAME", file=sys.stderr)
            return EXIT_USAGE
        if ns.op == "show":
            shown = servers.details(platform, ns.target, cwd)
            print(json.dumps(shown, indent=2, ensure_ascii=False))
            return EXIT_OK
        servers.find(platform, ns.target)
        if (refused := _admin_refusal(platform, ns)) is not None:
            return refused
        accepted = servers.accept(platform, ns.target, by=ns.by)
    except servers.ServerProblem as exc:
        print(f"aat servers {ns.op}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not accepted:
        print(f"aat servers accept: {ns.target} has nothing held to accept", file=sys.stderr)
    print(json.dumps(accepted))
    return EXIT_OK


def _import(ns: argparse.Namespace, roots: list[Path]) -> int:
    from webplatform.registry.server_import import ImportProblem, import_file

    if not ns.target:
        print("aat servers import: give the FILE (.mcp.json, settings.json, opencode.json)")
        return EXIT_USAGE
    into = Path(ns.into) if ns.into else roots[0]
    try:
        written = import_file(Path(ns.target), into)
    except ImportProblem as exc:
        print(f"aat servers import: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for item in written:
        print(item.path)
        for guess in item.guesses:
            print(f"  {item.name}: {guess}", file=sys.stderr)
    return EXIT_OK


def _admin_refusal(platform: Platform, ns: argparse.Namespace) -> int | None:
    """EXIT_USAGE unless `--by` names an operator who may accept server tools and the
    password given is theirs (`step_up_refusal`)."""
    from webplatform.trust.door import Change
    from webplatform.trust.permissions import Permission

    return step_up_refusal(
        platform,
        ns,
        change=Change.server_accept,
        bound_to={"server": ns.target},
        permission=Permission.accept_server_tools,
        refused="may not accept server tools",
    )
