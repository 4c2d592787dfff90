"""B6: `aat mcp` idle RSS, read from /proc once the SDK client has connected and gone quiet.

Each bridge runs in a home an earlier `aat mcp` set up (database migrated, keys made), as
every start but a home's first finds it; the first start, which migrates the new database
(alembic stays loaded afterwards), is reported on its own row.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from bench.clients import aat_mcp, body, child_pids
from bench.common import Report, rss_mb, temp_home

TITLE = "aat mcp idle RSS"
SAMPLES = 3


async def sample(home: Path) -> tuple[float, float]:
    """RSS of one fresh bridge on `home`: idle after initialize, and after a run and a
    discovery call."""
    async with aat_mcp(home) as client:
        pids = child_pids("webplatform mcp")
        assert len(pids) == 1, pids
        await client.list_tools()
        await anyio.sleep(1.5)
        idle = rss_mb(pids[0])
        result = await client.call_tool(
            "run_tool", {"tool": "hello-world", "args": {"name": "bench"}}
        )
        assert body(result)["status"] == "succeeded"
        await client.call_tool("capabilities", {})
        await anyio.sleep(1.5)
        return idle, rss_mb(pids[0])


async def measure(report: Report) -> None:
    """Run B6 and add its rows to `report`."""
    idle: list[float] = []
    after: list[float] = []
    with temp_home("b6") as home:
        first, _ = await sample(home)  # the home's first start: migrations, keys
        for _ in range(SAMPLES):
            held, used = await sample(home)
            idle.append(held)
            after.append(used)
    rss = sorted(idle)[len(idle) // 2]
    used = sorted(after)[len(after) // 2]
    # Issue 35's 90 MB is B9's in-process row, measured beside the minimal MCPServer.
    report.add("idle RSS after initialize", f"{rss:.0f} MB", note="issue 35's row: B9")
    report.add("idle RSS after a run and a discovery call", f"{used:.0f} MB")
    report.add("idle RSS after initialize, a home's first start", f"{first:.0f} MB")
    report.notes.append(
        f"B6: median of {SAMPLES} fresh bridges on a home set up by a first one; samples (MB) "
        f"idle {[round(x) for x in idle]}, after use {[round(x) for x in after]}; the first "
        f"start (it migrates the new database) {first:.0f} MB."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    anyio.run(measure, report)
