"""B11: what an `allow` rule adds to a call: `run_tool_confirmed outbox send-message` that a
rule lets through, against the same tool's reversible call, both through `aat mcp`.

The set-up a rule needs: an admin (`aat operator add`), the rule made as an admin would
(`aat rules add FILE --by ADMIN --password-stdin`, signed with the decision key), and a
running `aat serve` (its embedded worker starts allowed calls; `aat mcp` hands its session
to it over the socket in AAT_HOME). Two sides, alternating call by call over one SDK client
session: the allowed `send-message` (the rules read, the rule re-read and its signature
checked, the job recorded approved and signed naming the rule, the worker's own check of
rule and signature before it starts the tool) and `preview-message` with the same arguments
(read-only: runs at once). Same script, same arguments, both confined plain spawns.

Beside the wall time, the CPU `aat serve` used per call (from /proc, before and after each
call; the tools' own processes are not in it): on a loaded machine the wall time of a path
with more hand-offs between threads grows with the load, the CPU it costs much less.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio

from bench.clients import aat_mcp, body
from bench.common import (
    Report,
    aat_argv,
    aat_env,
    aat_serve,
    add_operator,
    median_ms,
    ms,
    temp_home,
)

TITLE = "a call allowed by a rule vs the same reversible call, through aat mcp"
ROUNDS = 60
WARMUP = 5
ADDED_MS = 2.0
ADMIN, PASSWORD = "bench", "bench-password-1"
ARGS = {"to": "ops@example.org", "subject": "weekly", "body": "hi"}
ALLOWED = {"tool": "outbox", "action": "send-message", "args": ARGS}
REVERSIBLE = {"tool": "outbox", "action": "preview-message", "args": ARGS}
RULE = """\
- effect: allow
  tool: outbox
  action: send-message
  args: {to: "*@example.org"}
  expires_in: 1h
  note: B11
"""


def add_rules(home: Path, text: str) -> list[int]:
    """`aat rules add FILE --by ADMIN --password-stdin`, as an admin would; the new ids."""
    path = home.with_name(f"{home.name}-rules.yaml")
    path.write_text(text)
    done = subprocess.run(
        aat_argv("rules", "add", str(path), "--by", ADMIN, "--password-stdin"),
        input=PASSWORD + "\n",
        text=True,
        env=aat_env(home),
        check=True,
        capture_output=True,
    )
    return [int(line) for line in done.stdout.split()]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds process `pid` has used (its own threads, not children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Samples = dict[str, list[tuple[float, float]]]


async def measure(home: Path, rule: int, server: int) -> Samples:
    """(seconds, `aat serve` CPU seconds) per call of each side, alternating, after WARMUP
    rounds."""
    async with aat_mcp(home) as client:

        async def allowed() -> None:
            answer = body(await client.call_tool("run_tool_confirmed", ALLOWED))
            assert answer["status"] == "succeeded", answer
            assert answer["allowed_by"]["rule"] == rule, answer

        async def reversible() -> None:
            answer = body(await client.call_tool("run_tool", REVERSIBLE))
            assert answer["status"] == "succeeded", answer

        sides: dict[str, Any] = {"allowed": allowed, "reversible": reversible}
        for _ in range(WARMUP):
            for side in sides.values():
                await side()
        samples: Samples = {name: [] for name in sides}
        for i in range(ROUNDS):
            for name in list(sides)[:: 1 if i % 2 else -1]:
                cpu, start = cpu_s(server), time.perf_counter()
                await sides[name]()
                took = time.perf_counter() - start
                samples[name].append((took, cpu_s(server) - cpu))
    return samples


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    with temp_home("b11") as home:
        add_operator(home, ADMIN, PASSWORD)  # the first operator is an admin
        (rule,) = add_rules(home, RULE)
        with aat_serve(home) as served:
            samples = anyio.run(measure, home, rule, served.pid)
    wall = {name: [took for took, _ in values] for name, values in samples.items()}
    cpu = {name: statistics.mean(c for _, c in values) * 1000 for name, values in samples.items()}
    allowed, reversible = median_ms(wall["allowed"]), median_ms(wall["reversible"])
    added = allowed - reversible
    report.add(
        "allowed by a rule: added time over the reversible call",
        ms(added),
        baseline=f"reversible {ms(reversible)}, allowed {ms(allowed)}",
        target=f"<= {ADDED_MS:g} ms",
        met=added <= ADDED_MS,
    )
    report.add(
        "allowed by a rule: added aat serve CPU per call",
        ms(cpu["allowed"] - cpu["reversible"]),
        baseline=f"reversible {ms(cpu['reversible'])}, allowed {ms(cpu['allowed'])}",
    )
    low = {name: round(min(values) * 1000, 1) for name, values in wall.items()}
    report.notes.append(
        f"B11: {ROUNDS} calls per side after {WARMUP} warm-up rounds, alternating, one SDK "
        f"client session through `aat mcp` relayed to `aat serve` (embedded worker); medians: "
        f"allowed `send-message` {ms(allowed)}, reversible `preview-message` {ms(reversible)}; "
        f"fastest: {low}; `aat serve` CPU per call (mean, clock ticks of 10 ms): "
        f"{ {name: round(value, 1) for name, value in cpu.items()} }."
    )
