"""AAT_NOTIFY end to end: a real `aat serve` (and a second process, `aat worker`, on the same
database) sends Apprise `json://` notifications to a local HTTP sink.

What an operator would check: the notice arrives within seconds of the agent's call, names
the call, carries the agent's reason on one line (clipped), links the job page and nothing
that approves, carries no argument values, comes once, and a reminder follows before the
window closes; a dead notifier delays nothing.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from serving import aat_env, aat_serve, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.integration]  # starts aat processes

AAT = [sys.executable, "-m", "webplatform"]
DASHBOARD = "https://aat.example.org/ops"
SECRET_BODY = "the-secret-body-7731"
CALL = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "hi", "body": SECRET_BODY},
    # What the agent tells the operator: on one line in the notice, without the controls.
    "reason": "the user asked for the weekly\nsummary \x1b[2J" + "now " * 110,
}


class Sink:
    """A local HTTP server that keeps every JSON body POSTed to it, with its arrival time."""

    def __init__(self) -> None:
        self.received: list[tuple[float, dict[str, Any]]] = []
        self.arrived = threading.Condition()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with sink.arrived:
                    sink.received.append((time.monotonic(), data))
                    sink.arrived.notify_all()
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]

    def wait_for(self, count: int, timeout: float) -> list[tuple[float, dict[str, Any]]]:
        """The first `count` messages, waiting up to `timeout` seconds for them."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, timeout=timeout)
            return list(self.received)


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    thread = threading.Thread(target=s.server.serve_forever, daemon=True)
    thread.start()
    yield s
    s.server.shutdown()
    s.server.server_close()


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return aat_env(
        home,
        AAT_DASHBOARD_URL=DASHBOARD,
        AAT_APPROVAL_WAIT_S="1",
        AAT_HEARTBEAT_S="0.5",
        **extra,
    )


async def call_confirmed(base: str) -> tuple[dict[str, Any], float]:
    """`run_tool_confirmed` over /mcp; its answer and how long it took."""
    async with Client(f"{base}/mcp") as client:
        started = time.monotonic()
        result = await client.call_tool("run_tool_confirmed", CALL)
        took = time.monotonic() - started
    assert result.structured_content is not None
    return result.structured_content, took


async def test_a_pending_call_notifies_once_then_reminds(sink: Sink, tmp_path: Path) -> None:
    env = env_for(
        tmp_path / "home",
        AAT_NOTIFY=f"json://127.0.0.1:{sink.port}/hook",
        AAT_APPROVAL_TTL_S="10",
    )
    worker_log = (tmp_path / "worker.log").open("w")
    with aat_serve(env=env, port=free_port(), log=tmp_path / "serve.log") as base:
        # A second process on the same database runs the same notification pass.
        worker = subprocess.Popen(
            [*AAT, "worker"], env=env, stdout=worker_log, stderr=subprocess.STDOUT
        )
        try:
            answer, _ = await call_confirmed(base)
            asked = time.monotonic()
            assert answer["status"] == "pending_approval"
            first = sink.wait_for(1, timeout=5)
            assert first, "no notification within 5 s of the call"
            arrived, message = first[0]
            assert arrived - asked <= 5
            # Past the reminder (8 s into a 10 s window) and the expiry: nothing else comes.
            everything = sink.wait_for(3, timeout=12)
        finally:
            worker.terminate()
            worker.wait(timeout=10)
            worker_log.close()
    job_link = f"{DASHBOARD}/jobs/{answer['job']}"
    assert message["title"] == "Approval needed: outbox send-message for mcp"
    lines = message["message"].splitlines()
    assert lines[-1] == f"Open: {job_link}"
    assert lines[0].startswith("Reason: the user asked for the weekly summary [2Jnow now")
    assert lines[0].endswith("…") and len(lines[0]) == len("Reason: ") + 300
    assert len(everything) == 2, [m for _, m in everything]
    reminder = everything[1][1]
    assert reminder["title"].startswith("Reminder, approval still needed: outbox send-message")
    assert job_link in reminder["message"]
    assert reminder["message"].splitlines()[0] == lines[0]
    for _, sent in everything:
        text = json.dumps(sent)
        assert SECRET_BODY not in text and "ops@example.org" not in text
        # The only link opens the job page; nothing in a notification can decide.
        assert re.findall(r"https?://[^\s\"]+", text) == [job_link]
        assert "/approve" not in text and "/deny" not in text


async def test_an_unreachable_notifier_delays_nothing(tmp_path: Path) -> None:
    # A dead notifier on loopback: it takes connections and never answers, so every send
    # waits out its timeout (tests send traffic to this machine only).
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        dead.listen(64)
        port = dead.getsockname()[1]
        env = env_for(tmp_path / "home", AAT_NOTIFY=f"json://127.0.0.1:{port}/hook")
        await _check_nothing_waits_for(env, tmp_path)


async def _check_nothing_waits_for(env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with aat_serve(env=env, port=free_port(), log=log) as base:
        took_each = []
        for _ in range(3):
            answer, took = await call_confirmed(base)
            assert answer["status"] == "pending_approval"
            took_each.append(took)
        async with Client(f"{base}/mcp") as client:
            started = time.monotonic()
            ran = await client.call_tool(
                "run_tool", {"tool": "hello-world", "args": {"name": "Ada"}}
            )
            run_took = time.monotonic() - started
        assert ran.structured_content is not None
        assert ran.structured_content["status"] == "succeeded"
        deadline = time.monotonic() + 40
        while "did not reach every AAT_NOTIFY URL" not in log.read_text():
            assert time.monotonic() < deadline, "the failed notification was never logged"
            time.sleep(0.5)
    # The pending answer comes after AAT_APPROVAL_WAIT_S (1 s), as without notifications.
    assert max(took_each) < 4, took_each
    assert run_took < 4, run_took


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_malformed_url_is_refused_at_start_in_one_line(command: str, tmp_path: Path) -> None:
    env = env_for(tmp_path / "home", AAT_NOTIFY="ntfy://ok-topic, slack://not-enough-tokens")
    done = subprocess.run(
        [*AAT, command, *(["--port", str(free_port())] if command == "serve" else [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"aat {command}: AAT_NOTIFY entry 2 (slack://…)")
    assert "not-enough-tokens" not in done.stderr
