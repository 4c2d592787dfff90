"""B1's and B5's shapes, for a feature's side by side: one call at a time, and 8 in flight.

Issue 35 asks that tracing off (SPEC §23), the limits (§20) and upstream servers (§22) each
leave B1 and B5 unchanged within noise. Each such benchmark runs two (or more) `aat mcp`
sessions that differ in that feature alone and hands them here: ROUNDS single calls per
side, alternating call by call, then BATCHES batches of BATCH calls with B5's 8 in flight,
alternating batch by batch, so the machine's load lands on every side alike.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import anyio
from mcp import Client

from bench.b5_concurrency import CONCURRENCY
from bench.clients import body, server_pid
from bench.common import Report, cpu_s, median_ms, ms

ROUNDS, WARMUP = 60, 5
# 400 calls a side in batches small enough to alternate often: the machine's load drifts.
BATCH, BATCHES = 40, 10
CALL = {"tool": "hello-world", "args": {"name": "bench"}}
# "Unchanged within noise": at most this ratio, with over without, on both shapes.
TARGET = 1.05

Samples = dict[str, list[float]]


async def one(client: Client) -> float:
    """Seconds for one hello-world call (which must succeed)."""
    start = time.perf_counter()
    result = await client.call_tool("run_tool", CALL)
    elapsed = time.perf_counter() - start
    assert body(result)["status"] == "succeeded", body(result)
    return elapsed


async def batch(client: Client) -> float:
    """Seconds for BATCH calls with CONCURRENCY in flight (B5's shape)."""
    limiter = anyio.Semaphore(CONCURRENCY)

    async def limited() -> None:
        async with limiter:
            await one(client)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(BATCH):
            tg.start_soon(limited)
    return time.perf_counter() - start


async def compare(sides: Mapping[str, Client]) -> tuple[Samples, Samples]:
    """Single calls and batches on every side, alternating: (one-call s, per-call s in a
    batch) per side."""
    names = list(sides)
    for _ in range(WARMUP):
        for client in sides.values():
            await one(client)
    single: Samples = {n: [] for n in names}
    for i in range(ROUNDS):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            single[name].append(await one(sides[name]))
    many: Samples = {n: [] for n in names}
    for i in range(BATCHES):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            many[name].append(await batch(sides[name]) / BATCH)
    return single, many


async def compare_cpu(
    sides: Mapping[str, tuple[Client, Path]],
) -> tuple[Samples, Samples, dict[str, float]]:
    """`compare` on sides given as (client, its `aat mcp`'s AAT_HOME), and each side's server
    CPU per call over every call made (ms)."""
    pids = {name: server_pid("webplatform mcp", home) for name, (_, home) in sides.items()}
    before = {name: cpu_s(pid) for name, pid in pids.items()}
    single, many = await compare({name: client for name, (client, _) in sides.items()})
    calls = WARMUP + ROUNDS + BATCH * BATCHES
    cpu = {name: (cpu_s(pid) - before[name]) / calls * 1000 for name, pid in pids.items()}
    return single, many, cpu


def ratio_rows(
    report: Report,
    pair: tuple[str, str],
    samples: tuple[Samples, Samples],
    *,
    label: str,
    issue: str = "",
    judged: bool = True,
) -> tuple[float, float]:
    """Two rows, the B1 and B5 shapes of side `pair[0]` over side `pair[1]` (`samples` as
    `compare` gives them), against TARGET when `judged`; the two ratios."""
    over, under = pair
    shapes = ("B1 side, one at a time", f"B5 side, {CONCURRENCY} in flight")
    ratios = []
    for shape, taken in zip(shapes, samples, strict=True):
        a, b = median_ms(taken[over]), median_ms(taken[under])
        ratios.append(a / b)
        report.add(
            f"{label}: {shape}",
            f"{a / b:.3f} ({ms(a)} a call)",
            baseline=f"{under} {ms(b)} a call",
            target=f"<= {TARGET}" if judged else "",
            met=a / b <= TARGET if judged else None,
            issue=issue,
        )
    return ratios[0], ratios[1]


def note(bench: str, single: Samples, many: Samples) -> str:
    """The notes' line: how many calls, and each side's medians."""
    medians = ", ".join(
        f"{name} {ms(median_ms(single[name]))} / {ms(median_ms(many[name]))}" for name in single
    )
    return (
        f"{bench}: {ROUNDS} single calls and {BATCHES} batches of {BATCH} ({CONCURRENCY} in "
        f"flight) per side, alternating, after {WARMUP} warm-up calls each; medians a call "
        f"(one at a time / in a batch): {medians}."
    )
