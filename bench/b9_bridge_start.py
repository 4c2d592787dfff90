"""B9: how soon `aat mcp` answers its first handshake message, and what it holds idle.

Three ways `aat mcp` serves: relayed to a running `aat serve` for the same AAT_HOME (the
socket in AAT_HOME), in-process (no server runs), and `--url` (a client of the server's
`/mcp`). Each sample spawns a fresh `aat mcp`, writes the first message of one protocol era
(`initialize` on 2025-11-25, `server/discover` on 2026-07-28) and times spawn to the first
line on stdout; then `tools/list`, 1.5 s of quiet, and its RSS from /proc.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    ISSUE_35,
    PYTHON,
    ROOT,
    Report,
    aat_argv,
    aat_env,
    aat_serve,
    ms,
    rss_mb,
    temp_home,
)

TITLE = "aat mcp: spawn to first answer, idle RSS"
SAMPLES = 5
FIRST_ANSWER_MS = 300.0
RELAYED_MB, IN_PROCESS_MB, URL_MB = 20.0, 90.0, 30.0
IN_PROCESS_MS = 1000.0
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
FIRST: dict[str, dict[str, Any]] = {
    "2025-11-25": {
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    },
    "2026-07-28": {"method": "server/discover", "params": {"_meta": MODERN_META}},
}


def _line(id_: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()


def sample(argv: list[str], env: dict[str, str], cwd: Path, era: str) -> tuple[float, float]:
    """(seconds from spawn to the first answer, idle RSS in MB) of one fresh `aat mcp`."""
    first = FIRST[era]
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(_line(1, first["method"], first["params"]) + b"\n")
        proc.stdin.flush()
        answer = proc.stdout.readline()
        elapsed = time.perf_counter() - start
        assert b'"result"' in answer, answer[:300]
        if era == "2025-11-25":
            proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            listing = _line(2, "tools/list", {})
        else:
            listing = _line(2, "tools/list", {"_meta": MODERN_META})
        proc.stdin.write(listing + b"\n")
        proc.stdin.flush()
        assert b"run_tool" in proc.stdout.readline()
        time.sleep(1.5)
        return elapsed, rss_mb(proc.pid)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Side:
    """One way of serving, as B9 measures it."""

    label: str
    argv: list[str]
    max_mb: float = 0.0
    first_ms: float = 0.0  # a target for spawn -> first answer; 0: none
    times: dict[str, list[float]] = field(default_factory=dict)
    rss: list[float] = field(default_factory=list)
    cwd: Path | None = None  # its own working folder (None: the caller's)
    issue: str = ""  # the line of issue 35's table its RSS row answers

    def take(self, env: dict[str, str], cwd: Path, era: str) -> None:
        """One fresh process: its first-answer time and idle RSS."""
        elapsed, held = sample(self.argv, env, self.cwd or cwd, era)
        self.times.setdefault(era, []).append(elapsed)
        self.rss.append(held)

    def first(self, era: str) -> float:
        """Median spawn -> first answer for `era`, in ms."""
        return statistics.median(self.times[era]) * 1000


def _measure(
    report: Report, side: Side, env: dict[str, str], cwd: Path, baseline: Side | None = None
) -> None:
    """Add the rows for one way of serving, both eras; a baseline is sampled alternately
    with it, so the machine's load lands on both alike."""
    for era in FIRST:
        for i in range(SAMPLES):
            pair = [side] if baseline is None else [side, baseline][:: 1 if i % 2 else -1]
            for one in pair:
                one.take(env, cwd, era)
        first_ms = side.first(era)
        report.add(
            f"aat mcp ({side.label}): spawn to first answer, {era}",
            ms(first_ms),
            baseline=f"{baseline.label} {ms(baseline.first(era))}" if baseline else "",
            target=f"<= {side.first_ms:.0f} ms" if side.first_ms else "",
            met=first_ms <= side.first_ms if side.first_ms else None,
        )
        for one in [side] if baseline is None else [side, baseline]:
            samples = [round(t * 1000) for t in one.times[era]]
            report.notes.append(f"B9 {one.label} {era}: spawn to first answer (ms) {samples}.")
    held_mb = statistics.median(side.rss)
    report.add(
        f"aat mcp ({side.label}): idle RSS",
        f"{held_mb:.0f} MB",
        baseline=f"{baseline.label} {statistics.median(baseline.rss):.0f} MB" if baseline else "",
        target=f"<= {side.max_mb:.0f} MB" if side.max_mb else "",
        met=held_mb <= side.max_mb if side.max_mb else None,
        issue=side.issue,
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    with temp_home("b9") as home:
        work = home.with_name(f"{home.name}-work")  # the caller's folder, outside AAT_HOME
        work.mkdir()
        env = aat_env(home)
        in_process = Side(
            "in-process", aat_argv("mcp"), IN_PROCESS_MB, IN_PROCESS_MS, issue=ISSUE_35[2]
        )
        # The floor under it: the SDK's own stdio server with one tool, nothing of aat's.
        minimal = Side("minimal MCPServer", [PYTHON, "-m", "bench.minimal_server"], cwd=ROOT)
        _measure(report, in_process, env, work, baseline=minimal)
        with aat_serve(home) as served:
            url = served.mcp_url
            relayed = Side("relayed", aat_argv("mcp"), RELAYED_MB, FIRST_ANSWER_MS)
            _measure(report, relayed, env, work)
            thin = Side("--url", aat_argv("mcp", "--url", url), URL_MB, FIRST_ANSWER_MS)
            sdk = Side("SDK relay", [PYTHON, "-m", "bench.sdk_relay", url])
            _measure(report, thin, env, work, baseline=sdk)
    report.notes.append(
        "B9: median of "
        f"{SAMPLES} fresh processes per era; relayed = a running `aat serve` for the same "
        "AAT_HOME takes the session over its local socket (the relay imports no SDK); "
        "in-process = no server runs, alternating with the minimal MCPServer (bench/"
        "minimal_server.py: the SDK's stdio server and one tool, the floor under it); "
        "--url = the standard-library HTTP relay to `/mcp`, "
        "beside the SDK relay it replaced (bench/sdk_relay.py), alternating."
    )
