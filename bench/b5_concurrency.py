"""B5: 400 hello-world calls, 8 at a time, through one `aat mcp` against 400 direct spawns.

Both sides run in the same run, alternating (direct, bridge, bridge, direct, ...), and the
median wall time of each side is compared. Every bridge answer must be `succeeded`.
"""

from __future__ import annotations

import time

import anyio
import anyio.to_thread
from mcp import Client

from bench.b1_overhead import direct_command, spawn_direct
from bench.clients import aat_mcp, body
from bench.common import Report, temp_home

TITLE = "400 hello-world calls, 8 concurrent: one bridge vs direct spawns"
CALLS, CONCURRENCY, ROUNDS = 400, 8, 2


async def in_parallel(call: object) -> float:
    """Wall seconds for CALLS calls of `call()` with CONCURRENCY in flight."""
    limiter = anyio.Semaphore(CONCURRENCY)

    async def one() -> None:
        async with limiter:
            await call()  # type: ignore[operator]

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(CALLS):
            tg.start_soon(one)
    return time.perf_counter() - start


async def measure(report: Report) -> None:
    """Run B5 and add its rows to `report`."""
    errors: list[object] = []
    with temp_home("b5") as home:
        argv, env, cwd = direct_command(str(home))
        limiter = anyio.CapacityLimiter(CONCURRENCY)

        async def direct() -> None:
            await anyio.to_thread.run_sync(lambda: spawn_direct(argv, env, cwd), limiter=limiter)

        async with aat_mcp(home) as client:

            async def bridged(client: Client = client) -> None:
                result = await client.call_tool(
                    "run_tool", {"tool": "hello-world", "args": {"name": "bench"}}
                )
                if body(result).get("status") != "succeeded":
                    errors.append(body(result))

            await bridged()  # warm
            times: dict[str, list[float]] = {"direct": [], "bridge": []}
            for i in range(ROUNDS):
                order = ["direct", "bridge"] if i % 2 == 0 else ["bridge", "direct"]
                for side in order:
                    fn = direct if side == "direct" else bridged
                    times[side].append(await in_parallel(fn))
    d, b = sorted(times["direct"]), sorted(times["bridge"])
    dm, bm = d[len(d) // 2], b[len(b) // 2]
    report.add(
        "errors through the bridge",
        str(len(errors)),
        baseline=f"{CALLS * ROUNDS} calls",
        target="0",
        met=not errors,
    )
    report.add(
        "bridge / direct wall time",
        f"{bm / dm:.3f} (bridge {bm:.2f} s)",
        baseline=f"direct {dm:.2f} s",
        target="<= 1.2",
        met=bm / dm <= 1.2,
    )
    report.notes.append(
        f"B5: {ROUNDS} rounds per side, alternating; wall times (s): "
        f"direct {[round(x, 2) for x in times['direct']]}, "
        f"bridge {[round(x, 2) for x in times['bridge']]}."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    anyio.run(measure, report)
