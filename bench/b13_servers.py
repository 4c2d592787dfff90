"""B13: B1's and B5's hello-world calls with a `servers/` folder configured, against none.

Two warm `aat mcp` sessions on the same example registry, alternating in one run: one as it
ships, one whose registry also holds an upstream MCP server (`servers/minimal`, the bench's
minimal `MCPServer`), its tools seen and accepted by an admin first, as an operator's would
be. Every call is to hello-world, never to the server: the rows show what merely having
servers configured costs the hot path (the registry composed with the pinned definitions,
the pins' stamp read per call). B1's side is one call at a time, B5's 8 in flight.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from mcp import Client

from bench.b5_concurrency import CONCURRENCY
from bench.clients import aat_mcp, body
from bench.common import EXAMPLES, PYTHON, ROOT, Report, median_ms, ms, temp_home

TITLE = "B1 and B5 with a servers/ folder configured vs without, side by side"
ROUNDS, WARMUP = 60, 5
BATCH, BATCHES = 80, 5
CALL = {"tool": "hello-world", "args": {"name": "bench"}}


def with_server(home: Path) -> str:
    """A registry root beside `home` holding server `minimal`, accepted in `home`'s store;
    the AAT_REGISTRY that adds it to the examples."""
    from webplatform import servers
    from webplatform.config import Settings
    from webplatform.platform import Platform
    from webplatform.process import server_pool

    root = home.with_name(f"{home.name}-servers")
    (root / "servers" / "minimal").mkdir(parents=True)
    (root / "servers" / "minimal" / "server.yaml").write_text(
        "name: minimal\ndescription: The bench's minimal MCP server\n"
        f"command: [{PYTHON}, -m, bench.minimal_server]\n"
        f"env: {{PYTHONPATH: {ROOT}}}\nreads: [{ROOT}]\n"
    )
    registry = f"{EXAMPLES}:{root}"
    platform = Platform(Settings(home=home, registry=registry))
    try:
        servers.refresh(platform, servers.find(platform, "minimal"))
        assert servers.accept(platform, "minimal", by="bench"), "nothing to accept"
        assert "minimal" in platform.registry().tools
    finally:
        server_pool.POOL.stop_all()
        platform.engine.dispose()
    return registry


async def one(client: Client) -> float:
    """Seconds for one hello-world call."""
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


async def measure(report: Report) -> None:
    """Run B13 and add its rows to `report`."""
    with temp_home("b13") as home, temp_home("b13-servers") as served_home:
        registry = with_server(served_home)
        async with aat_mcp(home) as bare, aat_mcp(served_home, AAT_REGISTRY=registry) as served:
            sides = {"without": bare, "with": served}
            for _ in range(WARMUP):
                for client in sides.values():
                    await one(client)
            single: dict[str, list[float]] = {n: [] for n in sides}
            for i in range(ROUNDS):
                for name in list(sides)[i % 2 :] + list(sides)[: i % 2]:
                    single[name].append(await one(sides[name]))
            many: dict[str, list[float]] = {n: [] for n in sides}
            for i in range(BATCHES):
                for name in list(sides)[i % 2 :] + list(sides)[: i % 2]:
                    many[name].append(await batch(sides[name]))
    _rows(report, single, many)


def _rows(report: Report, single: dict[str, list[float]], many: dict[str, list[float]]) -> None:
    one_with, one_without = median_ms(single["with"]), median_ms(single["without"])
    report.add(
        "B1 side (warm aat mcp): with servers / without",
        f"{one_with / one_without:.3f} ({ms(one_with)})",
        baseline=f"without {ms(one_without)}",
        target="<= 1.05",
        met=one_with / one_without <= 1.05,
    )
    per_with = median_ms(many["with"]) / BATCH
    per_without = median_ms(many["without"]) / BATCH
    report.add(
        f"B5 side ({CONCURRENCY} in flight): with servers / without",
        f"{per_with / per_without:.3f} ({ms(per_with)} a call)",
        baseline=f"without {ms(per_without)} a call",
        target="<= 1.05",
        met=per_with / per_without <= 1.05,
    )
    report.notes.append(
        f"B13: {ROUNDS} single calls and {BATCHES} batches of {BATCH} ({CONCURRENCY} in "
        "flight) per side, alternating; the served side's registry holds server `minimal` "
        "(the bench's minimal MCPServer) with its tools accepted, and no call goes to it."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    anyio.run(measure, report)
