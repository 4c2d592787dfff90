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
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import anyio

from bench.b9_bridge_start import serve
from bench.clients import aat_mcp, body
from bench.common import Report, aat_argv, aat_env, add_operator, median_ms, ms, temp_home

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


async def measure(home: Path, rule: int) -> dict[str, list[float]]:
    """Seconds per call of each side, alternating, after WARMUP rounds."""
    async with aat_mcp(home) as client:

        async def allowed() -> float:
            start = time.perf_counter()
            answer = body(await client.call_tool("run_tool_confirmed", ALLOWED))
            elapsed = time.perf_counter() - start
            assert answer["status"] == "succeeded", answer
            assert answer["allowed_by"]["rule"] == rule, answer
            return elapsed

        async def reversible() -> float:
            start = time.perf_counter()
            answer = body(await client.call_tool("run_tool", REVERSIBLE))
            elapsed = time.perf_counter() - start
            assert answer["status"] == "succeeded", answer
            return elapsed

        sides: dict[str, Any] = {"allowed": allowed, "reversible": reversible}
        for _ in range(WARMUP):
            for side in sides.values():
                await side()
        samples: dict[str, list[float]] = {name: [] for name in sides}
        for i in range(ROUNDS):
            for name in list(sides)[:: 1 if i % 2 else -1]:
                samples[name].append(await sides[name]())
    return samples


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    with temp_home("b11") as home:
        add_operator(home, ADMIN, PASSWORD)  # the first operator is an admin
        (rule,) = add_rules(home, RULE)
        with serve(home):
            samples = anyio.run(measure, home, rule)
    allowed, reversible = median_ms(samples["allowed"]), median_ms(samples["reversible"])
    added = allowed - reversible
    report.add(
        "allowed by a rule: added time over the reversible call",
        ms(added),
        baseline=f"reversible {ms(reversible)}, allowed {ms(allowed)}",
        target=f"<= {ADDED_MS:g} ms",
        met=added <= ADDED_MS,
    )
    low = {name: round(min(values) * 1000, 1) for name, values in samples.items()}
    report.notes.append(
        f"B11: {ROUNDS} calls per side after {WARMUP} warm-up rounds, alternating, one SDK "
        f"client session through `aat mcp` relayed to `aat serve` (embedded worker); medians: "
        f"allowed `send-message` {ms(allowed)}, reversible `preview-message` {ms(reversible)}; "
        f"fastest: {low}."
    )
