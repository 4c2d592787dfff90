"""B6: `aat mcp` idle RSS, read from /proc once the SDK client has connected and gone quiet."""

from __future__ import annotations

import anyio

from bench.clients import aat_mcp, body, child_pids
from bench.common import Report, rss_mb, temp_home

TITLE = "aat mcp idle RSS"
SAMPLES = 3


async def measure(report: Report) -> None:
    """Run B6 and add its rows to `report`."""
    idle: list[float] = []
    after: list[float] = []
    for _ in range(SAMPLES):
        with temp_home("b6") as home:
            async with aat_mcp(home) as client:
                pids = child_pids("webplatform mcp")
                assert len(pids) == 1, pids
                await client.list_tools()
                await anyio.sleep(1.5)
                idle.append(rss_mb(pids[0]))
                result = await client.call_tool(
                    "run_tool", {"tool": "hello-world", "args": {"name": "bench"}}
                )
                assert body(result)["status"] == "succeeded"
                await client.call_tool("capabilities", {})
                await anyio.sleep(1.5)
                after.append(rss_mb(pids[0]))
    rss = sorted(idle)[len(idle) // 2]
    used = sorted(after)[len(after) // 2]
    report.add("idle RSS after initialize", f"{rss:.0f} MB", target="<= 90 MB", met=rss <= 90)
    report.add(
        "idle RSS after a run and a discovery call",
        f"{used:.0f} MB",
        target="<= 90 MB",
        met=used <= 90,
    )
    report.notes.append(
        f"B6: median of {SAMPLES} fresh bridges; samples (MB) idle {[round(x) for x in idle]}, "
        f"after use {[round(x) for x in after]}."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    anyio.run(measure, report)
