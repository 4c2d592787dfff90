"""Helpers for the browser tests: the server and attacker handles, environment, ports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
# A foreign name that resolves to the dashboard, as DNS rebinding would make it.
REBOUND_HOST = "rebound.example"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--host-resolver-rules=MAP {REBOUND_HOST} 127.0.0.1",
]
OPERATOR = "alice"
PASSWORD = "correct horse battery"


@dataclass
class Server:
    """A running `aat serve`: its address, its AAT_HOME and its output log."""

    url: str
    port: int
    home: Path
    log: Path

    def outbox(self) -> list[Path]:
        """The message files the outbox tool wrote."""
        folder = self.home / "outbox"
        return sorted(folder.glob("*.json")) if folder.exists() else []


def serve_env(home: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
    env.update(
        {
            "AAT_HOME": str(home),
            "AAT_DASHBOARD_URL": f"http://127.0.0.1:{port}",
            "AAT_APPROVAL_WAIT_S": "40",
            "AAT_HEARTBEAT_S": "0.5",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


@dataclass
class Attacker:
    """A web page on another loopback port (another origin, same site)."""

    url: str
    html: dict[str, str]


def queue_directly(server: Server, subject: str = "s") -> int:
    """Queue an irreversible `outbox send-message` with `aat run --no-wait`; its job id."""
    out = subprocess.run(
        [sys.executable, "-m", "webplatform", "run", "outbox", "send-message", "--no-wait"]
        + ["--to", "x@example.org", "--subject", subject, "--body", "b"],
        env=serve_env(server.home, server.port),
        capture_output=True,
        text=True,
        timeout=30,
    )
    return int(json.loads(out.stdout)["job"])
