"""B7: what an idle `aat serve` (SQLite, embedded worker, registry watched) costs the CPU.

One server on a fresh AAT_HOME, left alone after it answers; its user + system CPU time is
read from /proc before and after WINDOW_S seconds and given per idle minute.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from bench.common import Report, aat_argv, aat_env, free_port, temp_home, wait_http

TITLE = "idle aat serve (SQLite): CPU-seconds per idle minute"
SETTLE_S, WINDOW_S = 5.0, 60.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    with temp_home("b7") as home:
        port = free_port()
        server = subprocess.Popen(
            aat_argv("serve", "--port", str(port)),
            env=aat_env(home),
            cwd=str(home.parent),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz")
            time.sleep(SETTLE_S)
            before = cpu_seconds(server.pid)
            time.sleep(WINDOW_S)
            used = cpu_seconds(server.pid) - before
        finally:
            server.terminate()
            server.wait(timeout=30)
    per_minute = used * 60 / WINDOW_S
    report.add(
        "idle aat serve CPU per idle minute",
        f"{per_minute:.2f} s",
        baseline=(
            "0.44-0.66 s before uvicorn's calmer loop and the subscriber-gated watcher; "
            "about 1.2 s before waking on the database's own change signal"
        ),
    )
    report.notes.append(
        f"B7: one `aat serve` on SQLite (embedded worker, registry watched), left idle "
        f"{SETTLE_S:.0f} s, then its CPU time over {WINDOW_S:.0f} s: {used:.2f} s."
    )
