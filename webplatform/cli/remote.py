"""`aat mcp --url URL`: the stdio bridge as a client of a running `aat serve`'s `/mcp`.

Kept apart from the rest of the command line (and from `webplatform.config`, which loads
pydantic) so this mode starts with the standard library alone: the relay
(`webplatform.mcp.transports.relay`) reads the two variables it needs itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

EXIT_USAGE = 2
# The approval wait `aat serve` uses unless AAT_APPROVAL_WAIT_S says otherwise (config.py).
DEFAULT_APPROVAL_WAIT_S = 50.0
DRAIN_MARGIN_S = 10.0


def aat_variable(environ: Mapping[str, str], name: str) -> str:
    """`name` from the environment, its case ignored as the settings ignore it; else empty."""
    if name in environ:
        return environ[name]
    return next((v for k, v in environ.items() if k.upper() == name), "")


def drain_time(environ: Mapping[str, str]) -> float:
    """How long requests read before the client's end of input may still take to answer:
    a held call waits for the operator at most the approval wait, then answers."""
    try:
        wait = float(aat_variable(environ, "AAT_APPROVAL_WAIT_S") or DEFAULT_APPROVAL_WAIT_S)
    except ValueError:
        wait = DEFAULT_APPROVAL_WAIT_S
    return (wait if wait > 0 else DEFAULT_APPROVAL_WAIT_S) + DRAIN_MARGIN_S


def mcp_url(
    *, url: str | None, registry: Sequence[str] | None, db: str | None, surface: str
) -> int:
    """Serve stdio by forwarding to `url` (default `AAT_MCP_URL`); returns the exit code."""
    if registry or db or surface != "generic":
        sys.stderr.write(
            "aat mcp --url: --registry, --db and --surface belong to the server; "
            "drop them (the server at the URL decides)\n"
        )
        return EXIT_USAGE
    from webplatform.mcp.transports.relay import run_relay

    environ = os.environ
    return run_relay(
        url=url or aat_variable(environ, "AAT_MCP_URL"),
        token=aat_variable(environ, "AAT_AGENT_TOKEN"),
        drain_s=drain_time(environ),
    )
