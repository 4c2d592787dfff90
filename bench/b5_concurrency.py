"""B5: 400 hello-world calls, 8 at a time, through one `aat mcp` against 400 direct spawns.

Three sides run in the same run, rotating: direct spawns, a bridge on the example (warm)
hello-world, and a bridge on the same script with `warm: false` (the plain call path). The
median wall time of each side is compared. Every bridge answer must be `succeeded`.
"""

from __future__ import annotations

import time

import anyio
import anyio.to_thread
from mcp import Client

from bench.b1_overhead import direct_command, plain_registry, spawn_direct
from bench.clients import aat_mcp, body, server_pid
from bench.common import ISSUE_35, Report, cpu_s, temp_home

TITLE = "400 hello-world calls, 8 concurrent: one bridge vs direct spawns"
CALLS, CONCURRENCY, ROUNDS = 400, 8, 3
# Issue 35: the plain call path, 8 in flight, within 1.2x the direct spawns' wall time.
TARGET = 1.2


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
    with temp_home("b5") as home, temp_home("b5-plain") as plain_home:
        argv, env, cwd = direct_command(str(home))
        registry = plain_registry(plain_home)
        limiter = anyio.CapacityLimiter(CONCURRENCY)

        async def direct() -> None:
            await anyio.to_thread.run_sync(lambda: spawn_direct(argv, env, cwd), limiter=limiter)

        async with (
            aat_mcp(home) as client,
            aat_mcp(plain_home, AAT_REGISTRY=str(registry)) as plain_client,
        ):

            async def bridged(client: Client = client) -> None:
                result = await client.call_tool(
                    "run_tool", {"tool": "hello-world", "args": {"name": "bench"}}
                )
                if body(result).get("status") != "succeeded":
                    errors.append(body(result))

            async def plain() -> None:
                await bridged(plain_client)

            await bridged()  # warm
            await plain()
            sides = {"direct": direct, "bridge": bridged, "plain": plain}
            servers = {
                "bridge": server_pid("webplatform mcp", home),
                "plain": server_pid("webplatform mcp", plain_home),
            }
            times: dict[str, list[float]] = {name: [] for name in sides}
            cpu: dict[str, list[float]] = {name: [] for name in servers}
            names = list(sides)
            for i in range(ROUNDS):
                for side in names[i % 3 :] + names[: i % 3]:
                    before = cpu_s(servers[side]) if side in servers else 0.0
                    times[side].append(await in_parallel(sides[side]))
                    if side in servers:
                        cpu[side].append((cpu_s(servers[side]) - before) / CALLS * 1000)
    dm, bm, pm = (sorted(times[n])[len(times[n]) // 2] for n in ("direct", "bridge", "plain"))
    report.add(
        "errors through the bridges",
        str(len(errors)),
        baseline=f"{2 * CALLS * ROUNDS} calls",
        target="0",
        met=not errors,
    )
    report.add(
        "bridge (warm tool) / direct wall time",
        f"{bm / dm:.3f} (bridge {bm:.2f} s)",
        baseline=f"direct {dm:.2f} s",
    )
    report.add(
        "bridge (plain tool) / direct wall time",
        f"{pm / dm:.3f} (bridge {pm:.2f} s)",
        baseline=f"direct {dm:.2f} s",
        target=f"<= {TARGET}",
        met=pm / dm <= TARGET,
        issue=ISSUE_35[4],
    )
    for side, what in (("bridge", "warm"), ("plain", "plain")):
        report.add(
            f"bridge ({what} tool): its CPU per call, {CONCURRENCY} in flight",
            f"{sorted(cpu[side])[ROUNDS // 2]:.1f} ms",
            baseline=f"rounds {[round(x, 1) for x in cpu[side]]} ms",
        )
    report.notes.append(
        f"B5: {ROUNDS} rounds per side, rotating; wall times (s): "
        f"direct {[round(x, 2) for x in times['direct']]}, "
        f"bridge warm {[round(x, 2) for x in times['bridge']]}, "
        f"bridge plain {[round(x, 2) for x in times['plain']]}."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    anyio.run(measure, report)
