"""B15: B1's and B5's hello-world calls with SPEC §20's limits in force, against without.

Four `aat mcp` sessions, alternating in one run (bench/hotpath.py): the example (warm)
hello-world and the same script with `warm: false` (plain), each as shipped and with the
limits taken out (`python -m bench.variant without-limits mcp`: each call's child forked
straight from its zygote instead of as pid 1 of a PID namespace of its own with a reaper,
a fresh `/proc` and a pid cap, and no resource limits or sized scratch tmpfs). Both sides
start through `bench.variant`, so they differ in the limits alone. Before the timing, each
side runs a tool that prints its PID namespace twice: as shipped, each call has a namespace
of its own; without limits, the calls share their zygote's.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import Client

from bench import hotpath
from bench.b1_overhead import plain_registry
from bench.clients import body, stdio_client
from bench.common import EXAMPLES, ISSUE_35, PYTHON, Report, temp_home

TITLE = "B1 and B5 with the limits of SPEC §20 in force vs without, side by side"
PIDNS_TOOL = """\
name: pidns
description: Benchmark tool (bench/B15) - prints the PID namespace it runs in.
runtime: exec
entrypoint: main.sh
actions:
  - {name: show, read_only: true}
"""
PIDNS_SCRIPT = """\
#!/bin/sh
printf '{"pidns": "%s"}\\n' "$(readlink /proc/self/ns/pid)"
"""


def pidns_registry(root: Path) -> Path:
    """A registry root holding the `pidns` tool."""
    folder = root / "tools" / "pidns"
    folder.mkdir(parents=True)
    (folder / "tool.yaml").write_text(PIDNS_TOOL)
    script = folder / "main.sh"
    script.write_text(PIDNS_SCRIPT)
    script.chmod(0o755)
    return root


async def namespaces_seen(client: Client) -> set[str]:
    """The PID namespaces two calls of `pidns` ran in."""
    seen = set()
    for _ in range(2):
        result = await client.call_tool("run_tool", {"tool": "pidns", "args": {}})
        answer = body(result)
        assert answer["status"] == "succeeded", answer
        seen.add(str(answer["result"]["pidns"]))
    return seen


async def measure(report: Report) -> None:
    """Run B15 and add its rows to `report`."""
    async with AsyncExitStack() as stack:
        extra = pidns_registry(stack.enter_context(temp_home("b15-pidns")))
        sides: dict[str, Client] = {}
        for kind in ("warm", "plain"):
            for variant, name in (("as-shipped", "limits"), ("without-limits", "no limits")):
                home = stack.enter_context(temp_home(f"b15-{kind}-{variant}"))
                tools = plain_registry(home) if kind == "plain" else EXAMPLES
                argv = [PYTHON, "-m", "bench.variant", variant, "mcp"]
                session = stdio_client(argv, home, {"AAT_REGISTRY": f"{tools}:{extra}"})
                sides[f"{kind}, {name}"] = await stack.enter_async_context(session)
        for name, client in sides.items():
            seen = await namespaces_seen(client)
            own = "no limits" not in name
            assert len(seen) == (2 if own else 1), f"{name}: PID namespaces {seen}"
        single, many = await hotpath.compare(sides)
    for kind in ("warm", "plain"):
        hotpath.ratio_rows(
            report,
            (f"{kind}, limits", f"{kind}, no limits"),
            (single, many),
            label=f"{kind} tool through aat mcp, limits / without",
            issue=ISSUE_35[7],
        )
    report.notes.append(
        hotpath.note("B15", single, many)
        + " Checked first: as shipped, two calls ran in two PID namespaces of their own; "
        "without limits, in their zygote's."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    anyio.run(measure, report)
