"""Real `aat` processes for the integration tests: start, wait for, kill, clean up.

Every process gets its own session (process group), logs to a file under the test's
tmp_path, and is killed by its own pid at teardown if the test did not stop it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import serving
from sqlalchemy import Engine
from sqlmodel import col, select

from webplatform.config import Settings
from webplatform.store import Job, JobState, session_scope

AAT = [sys.executable, "-m", "webplatform"]
PR_SET_PDEATHSIG = 1
SEND = {"to": "ops@example.org", "subject": "please send", "body": "hello"}


def _die_with_parent() -> None:
    # Linux: SIGKILL this child when the test process dies, even if pytest itself is killed
    # before its teardown, so no `aat serve` or worker outlives the test session.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def aat_env(settings: Settings, **extra: object) -> dict[str, str]:
    """The environment for an `aat` process sharing this test's AAT_HOME and database."""
    env = serving.aat_env(settings.home)
    # As the in-process tests' settings: a loaded machine starts a confined preview slowly.
    env["AAT_PREVIEW_TIMEOUT_S"] = str(settings.preview_timeout_s)
    if settings.db_url:
        env["AAT_DB_URL"] = settings.db_url.get_secret_value()
    env |= {f"AAT_{k.upper()}": str(v) for k, v in extra.items()}
    return env


def wait_for(
    predicate: Callable[[], Any], timeout_s: float, what: str, said: Callable[[], str] = str
) -> Any:
    """Poll `predicate` until it returns something truthy; fail naming `what` (and what
    `said` tells then: the job's state, say)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what} {said()}".strip())
        time.sleep(0.05)


def job_rows(engine: Engine) -> list[Job]:
    """Every job row, oldest first."""
    with session_scope(engine, write=False) as session:
        return list(session.exec(select(Job).order_by(col(Job.id))).all())


def outbox_files(settings: Settings) -> list[Path]:
    """The messages `outbox send-message` wrote (not half-written temp files)."""
    folder = settings.home / "outbox"
    return sorted(folder.glob("[!.]*.json")) if folder.is_dir() else []


class Procs:
    """The processes a test started; each is killed by its pid at teardown."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[subprocess.Popen[Any]] = []
        logs.mkdir(parents=True, exist_ok=True)

    def start(
        self, name: str, argv: list[str], env: dict[str, str], **kw: Any
    ) -> subprocess.Popen[Any]:
        """Start `aat ARGV...` in its own session, stderr (and stdout unless piped) to a log."""
        log = (self.logs / f"{name}.log").open("ab")
        kw.setdefault("stdout", log)
        proc = subprocess.Popen(
            [*AAT, *argv],
            env=env,
            stderr=log,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            **kw,
        )
        self.started.append(proc)
        return proc

    def log(self, name: str) -> str:
        """What a process wrote to its log so far."""
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def serve(
        self, name: str, env: dict[str, str], port: int, *extra: str
    ) -> subprocess.Popen[Any]:
        """`aat serve` on `port`, once /healthz answers (as `serving.aat_serve` waits)."""
        proc = self.start(name, ["serve", "--port", str(port), *extra], env)
        serving.wait_healthy(f"http://127.0.0.1:{port}", proc, self.logs / f"{name}.log")
        return proc

    def sigkill(self, proc: subprocess.Popen[Any]) -> None:
        """SIGKILL one process (not its children: a tool it started keeps running)."""
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        """Hang up on stdio bridges, SIGINT the rest; SIGKILL whatever is still there."""
        for proc in self.started:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()  # a stdio bridge ends when its client hangs up
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.started:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    """Start real `aat` processes; all of them are stopped after the test."""
    started = Procs(tmp_path / "logs")
    try:
        yield started
    finally:
        started.stop_all()


class StdioBridge:
    """A raw `aat mcp` process: JSON-RPC lines in, answers read by id with a timeout."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.stdin = proc, proc.stdin
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, stdout: IO[bytes]) -> None:
        for line in iter(stdout.readline, b""):
            self.lines.put(line)

    def send(self, line: str | bytes) -> None:
        """Write one line (a newline is added)."""
        data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
        self.stdin.write(data + b"\n")
        self.stdin.flush()

    def request(self, id_: int | str, method: str, params: dict[str, Any]) -> None:
        """Send a JSON-RPC request."""
        self.send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}))

    def answer(self, id_: int | str, timeout_s: float = 30) -> dict[str, Any]:
        """The response with this id; every line on stdout on the way must be JSON-RPC."""
        deadline = time.monotonic() + timeout_s
        while True:
            for message in self.seen:
                if message.get("id") == id_ and ("result" in message or "error" in message):
                    self.seen.remove(message)
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no answer to request {id_!r} within {timeout_s:g} s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            message = json.loads(line)
            assert message.get("jsonrpc") == "2.0", line[:200]
            self.seen.append(message)

    def initialize(self) -> dict[str, Any]:
        """The legacy handshake; returns the initialize result."""
        self.request(
            "init",
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "integration", "version": "1"},
            },
        )
        result = self.answer("init")["result"]
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return dict(result)

    def call(self, id_: int | str, tool: str, arguments: dict[str, Any]) -> None:
        """Send tools/call without waiting."""
        self.request(id_, "tools/call", {"name": tool, "arguments": arguments})


def start_bridge(procs: Procs, name: str, env: dict[str, str]) -> StdioBridge:
    """`aat mcp` with pipes, handshake done."""
    proc = procs.start(name, ["mcp"], env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    bridge = StdioBridge(proc)
    bridge.initialize()
    return bridge


def job_said(engine: Engine, job_id: int) -> Callable[[], str]:
    """What a failed wait adds: the job's state, error and note, then."""

    def said() -> str:
        with session_scope(engine, write=False) as session:
            job = session.get(Job, job_id)
        if job is None:
            return f"(job {job_id} is gone)"
        return f"(job {job_id} is {job.state}: error {job.error!r}, note {job.note!r})"

    return said


def state_of(engine: Engine, job_id: int) -> JobState | None:
    """A job's state now."""
    with session_scope(engine, write=False) as session:
        job = session.get(Job, job_id)
        return None if job is None else JobState(job.state)
