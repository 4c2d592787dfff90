"""B10: what namespaces of its own cost a tool per call (SPEC §17), plain and warm, vs Landlock.

Six sides through aat's runner in this process, alternating call by call in one run: the
example hello-world spawned plain, the same forked warm, and a tiny `exec` tool (a shell
script, the nearest to `/bin/true` a tool can be), each in namespaces (user, mount and
network, entered once per spawner or warm interpreter; each call's child attaches its own
paths, in a PID namespace of its own made ahead of the call, and forks the tool from there)
and with Landlock alone (`AAT_UNCONFINED=namespaces` where namespaces are missing). Calls
follow each other at once, so the next call's PID namespace is made while this one runs.
Medians over ROUNDS calls each; the ratio is namespaces over Landlock alone.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench.common import EXAMPLES, Report, alternate, median_ms, ms, temp_home, timed
from webplatform.process import confine, runner
from webplatform.registry import RegistryLoader
from webplatform.registry.model import ToolSpec

TITLE = "tools in namespaces of their own vs Landlock alone: per-call cost, plain and warm"
ROUNDS = 80
WARMUP = 5
# The ratio a call in namespaces may cost over the same call with Landlock alone.
TARGET = 1.25
TINY_TOOL = """\
name: tiny
description: Benchmark tool (bench/B10) - prints an empty JSON object from a shell script.
runtime: exec
entrypoint: main.sh
actions:
  - {name: run, read_only: true}
"""


def tools(root: Path) -> dict[str, ToolSpec]:
    """hello-world (plain and warm) and the tiny exec tool, loaded as aat loads them."""
    folder = root / "tools" / "tiny"
    folder.mkdir(parents=True)
    (folder / "tool.yaml").write_text(TINY_TOOL)
    script = folder / "main.sh"
    script.write_text("#!/bin/sh\necho '{}'\n")
    script.chmod(0o755)
    hello = RegistryLoader([EXAMPLES]).load().tools["hello-world"]
    return {
        "plain": replace(hello, warm=False),
        "warm": replace(hello, warm=True),
        "exec": RegistryLoader([root]).load().tools["tiny"],
    }


def call(tool: ToolSpec, home: Path, fence: confine.Fence) -> float:
    """Seconds for one call of `tool`'s first action through the runner."""
    args = {"name": "bench"} if tool.name == "hello-world" else {}

    def once() -> None:
        result = runner.run(runner.ToolCall(tool, tool.actions[0], args, home=home, fence=fence))
        assert result.ok, result.error

    return timed(once)


def measure(report: Report) -> None:
    """Run B10 and add its rows to `report`."""
    with temp_home("b10") as home, temp_home("b10-registry") as root:
        problem = confine.namespaces_problem(confine.Fence(home=home))
        if problem is not None:
            report.notes.append(f"B10 not run: tools get no namespaces here ({problem}).")
            return
        walls = {
            "namespaces": confine.Fence(home=home),
            "Landlock alone": confine.Fence(
                home=home, pretend_no_namespaces=True, landlock_alone=True
            ),
        }
        sides = {
            f"{kind} / {wall}": (lambda t=tool, f=fence: call(t, home, f))
            for kind, tool in tools(root).items()
            for wall, fence in walls.items()
        }
        alternate(sides, WARMUP)
        samples = alternate(sides, ROUNDS)
    medians = {name: median_ms(values) for name, values in samples.items()}
    for kind in ("plain", "warm", "exec"):
        ns, alone = medians[f"{kind} / namespaces"], medians[f"{kind} / Landlock alone"]
        report.add(
            f"{kind} call in namespaces / Landlock alone",
            f"{ns / alone:.2f}x ({ms(ns)} / {ms(alone)})",
            baseline=f"Landlock alone {ms(alone)}",
            target=f"<= {TARGET}",
            met=ns / alone <= TARGET,
            note=f"+{ms(ns - alone)} a call",
        )
    report.notes.append(
        f"B10: {ROUNDS} calls per side after {WARMUP} warm-up rounds, order rotated each round; "
        "medians (ms): "
        + ", ".join(f"{name} {value:.2f}" for name, value in medians.items())
        + ". plain and warm run the example hello-world; exec is a shell script that prints "
        "{}. A call in namespaces pays, in its forked child, for clones of its own paths, a "
        "copy of the tools' mount namespace to attach them in (and its teardown at exit); the "
        "user and network namespaces, and the static view, are made once per spawner or warm "
        "interpreter."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    measure(report)
