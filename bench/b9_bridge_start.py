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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import Report, aat_argv, aat_env, free_port, ms, rss_mb, temp_home, wait_http

TITLE = "aat mcp: spawn to first answer, idle RSS"
SAMPLES = 5
FIRST_ANSWER_MS = 300.0
RELAYED_MB, IN_PROCESS_MB = 20.0, 90.0
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


@contextmanager
def serve(home: Path) -> Iterator[str]:
    """A running `aat serve` on `home`; yields its /mcp URL."""
    port = free_port()
    proc = subprocess.Popen(
        aat_argv("serve", "--port", str(port)),
        env=aat_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _measure(
    report: Report, label: str, argv: list[str], env: dict[str, str], cwd: Path, max_mb: float
) -> None:
    """Add the rows for one way of serving, both eras."""
    rss: list[float] = []
    for era in FIRST:
        times = []
        for _ in range(SAMPLES):
            elapsed, held = sample(argv, env, cwd, era)
            times.append(elapsed)
            rss.append(held)
        first_ms = statistics.median(times) * 1000
        target = f"<= {FIRST_ANSWER_MS:.0f} ms" if label == "relayed" else ""
        report.add(
            f"aat mcp ({label}): spawn to first answer, {era}",
            ms(first_ms),
            target=target,
            met=first_ms <= FIRST_ANSWER_MS if target else None,
        )
        report.notes.append(
            f"B9 {label} {era}: spawn to first answer (ms) {[round(t * 1000) for t in times]}."
        )
    held_mb = statistics.median(rss)
    report.add(
        f"aat mcp ({label}): idle RSS",
        f"{held_mb:.0f} MB",
        target=f"<= {max_mb:.0f} MB" if max_mb else "",
        met=held_mb <= max_mb if max_mb else None,
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    with temp_home("b9") as home:
        work = home.with_name(f"{home.name}-work")  # the caller's folder, outside AAT_HOME
        work.mkdir()
        _measure(report, "in-process", aat_argv("mcp"), aat_env(home), work, IN_PROCESS_MB)
        with serve(home) as url:
            _measure(report, "relayed", aat_argv("mcp"), aat_env(home), work, RELAYED_MB)
            _measure(report, "--url", aat_argv("mcp", "--url", url), aat_env(home), work, 0.0)
    report.notes.append(
        "B9: median of "
        f"{SAMPLES} fresh processes per era; relayed = a running `aat serve` for the same "
        "AAT_HOME takes the session over its local socket (the relay imports no SDK); "
        "in-process = no server runs; --url = the HTTP client of `/mcp`."
    )
