"""`aat`: start the dashboard, the MCP bridge and workers; run, check and configure.

The command line itself is `webplatform.cli.main`. This entry point loads it only after
`aat mcp` has tried to hand its session to a running `aat serve`
(`webplatform.mcp.transports.handoff`, standard library only), so a relayed `aat mcp` answers
its client's first message at once instead of after a second of imports; `aat mcp --url`
loads only its relay, which needs nothing beyond the standard library either.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `aat` console script; returns the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["mcp"]:
        from webplatform.mcp.transports import handoff

        relayed = handoff.relay(args[1:])
        if relayed is not None:
            return relayed
        options = handoff.parse_mcp_args(args[1:])
        if options is not None and (options["url"] or os.environ.get("AAT_MCP_URL")):
            # `aat mcp --url` is a relay on the standard library: skip the command line.
            from webplatform.cli.remote import mcp_url

            return mcp_url(**options)
        # In process: some 200,000 objects come with the imports, under 1% of them garbage,
        # and the cyclic collector would walk them again and again (a tenth of the start).
        # `run_stdio` freezes them and turns it back on once the server is built.
        gc.disable()
    from webplatform.cli.main import main as command_line

    return command_line(argv)
