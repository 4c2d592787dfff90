"""`aat agent add|list|revoke`: the named tokens MCP clients send to `/mcp`."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from webplatform.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, settings_from


def cmd_agent(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Mint, list or revoke agent tokens; `add` prints the token, alone, on stdout."""
    from webplatform.platform import Platform
    from webplatform.store import agents
    from webplatform.trust.authority import TOKENS_FILE, remember

    platform = Platform(settings_from(ns))
    if ns.op == "list":
        rows = platform.tokens.listed()
        print(f"{'NAME':20} {'OWNER':16} {'CREATED':20} {'LAST USED':20} REVOKED")
        for row in rows:
            print(
                f"{row.name:20} {row.owner or '-':16} {_when(row.created_at):20} "
                f"{_when(row.last_used_at):20} {_when(row.revoked_at)}"
                + ("" if row.signed else "  unsigned: refused (401)")
            )
        return EXIT_OK
    if not ns.name:
        print(f"aat agent {ns.op}: give the agent's NAME", file=sys.stderr)
        return EXIT_USAGE
    if ns.op == "revoke":
        revoked = platform.tokens.revoke(ns.name)
        if not revoked:
            print(f"no active agent {ns.name!r}; `aat agent list` shows them", file=sys.stderr)
            return EXIT_FAILED
        print(f"revoked agent {ns.name}", file=sys.stderr)
        return EXIT_OK
    try:
        _row, token = platform.tokens.mint(ns.name, ns.owner)
    except agents.AgentTokenError as exc:
        print(f"aat agent add: {exc}", file=sys.stderr)
        return EXIT_USAGE
    remember(platform, TOKENS_FILE)
    print(token)
    print(
        f"added agent {ns.name}: the token above is shown once; "
        "give it to the agent as AAT_AGENT_TOKEN",
        file=sys.stderr,
    )
    return EXIT_OK


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%SZ") if at is not None else "-"
