"""`aat mcp --url URL`: the stdio bridge as a client of a running `aat serve`'s `/mcp`.

Kept apart from the rest of the command line (and from `webplatform.cli.common`, which loads
the database layer) so this mode starts with the SDK's client and nothing of the platform.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

EXIT_USAGE = 2


def mcp_url(
    *, url: str | None, registry: Sequence[str] | None, db: str | None, surface: str
) -> int:
    """Serve stdio by forwarding to `url` (default `AAT_MCP_URL`); returns the exit code."""
    from webplatform.config import SettingsError, get_settings

    if registry or db or surface != "generic":
        print(
            "aat mcp --url: --registry, --db and --surface belong to the server; "
            "drop them (the server at the URL decides)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        settings = get_settings()  # every command refuses settings that cannot work
    except SettingsError as exc:
        print(f"aat mcp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from webplatform.mcp.logs import configure_stderr_logging
    from webplatform.mcp.relay import run_relay

    configure_stderr_logging()
    return run_relay(url=url or settings.mcp_url, token=settings.agent_token.get_secret_value())
