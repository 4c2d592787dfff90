"""B13: B1's and B5's hello-world calls with a `servers/` folder configured, against none.

Two warm `aat mcp` sessions on the same example registry, alternating in one run: one as it
ships, one whose registry also holds an upstream MCP server (`servers/minimal`, the bench's
minimal `MCPServer`), its tools seen and accepted by an admin first, as an operator's would
be. Every call is to hello-world, never to the server: the rows show what merely having
servers configured costs the hot path (the registry composed with the pinned definitions,
the pins' stamp read per call), in B1's and B5's shapes (bench/hotpath.py).
"""

from __future__ import annotations

from pathlib import Path

import anyio

from bench import hotpath
from bench.clients import aat_mcp
from bench.common import EXAMPLES, ISSUE_35, PYTHON, ROOT, Report, temp_home

TITLE = "B1 and B5 with a servers/ folder configured vs without, side by side"


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


async def measure(report: Report) -> None:
    """Run B13 and add its rows to `report`."""
    with temp_home("b13") as home, temp_home("b13-servers") as served_home:
        registry = with_server(served_home)
        async with aat_mcp(home) as bare, aat_mcp(served_home, AAT_REGISTRY=registry) as served:
            single, many, cpu = await hotpath.compare_cpu(
                {"without": (bare, home), "with": (served, served_home)}
            )
    hotpath.ratio_rows(
        report,
        ("with", "without"),
        (single, many),
        label="warm aat mcp, with servers / without",
        issue=ISSUE_35[8],
    )
    report.add(
        "warm aat mcp: server CPU per call, with servers / without",
        f"{cpu['with']:.1f} / {cpu['without']:.1f} ms",
    )
    report.notes.append(
        hotpath.note("B13", single, many)
        + " The served side's registry holds server `minimal` (the bench's minimal MCPServer) "
        "with its tools accepted, and no call goes to it."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    anyio.run(measure, report)
