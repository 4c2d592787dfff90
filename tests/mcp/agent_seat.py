"""A user's seat for an agent CLI from npm (Codex, Gemini) driven against aat, and its model.

The seat: a throwaway HOME (so aat's home is its default, ~/.local/share/aat, as for a user who
never set AAT_HOME), a project folder the CLI runs in, a running `aat serve` on that home (its
embedded worker runs approved jobs, and the `aat mcp` the CLI starts relays its session to it),
and an operator who approves from the test with a signed decision, as the dashboard would.

The model: a loopback HTTP endpoint that plays one scripted agent turn, the same for every
CLI. It calls `run_tool_confirmed` on `outbox send-message`; while an answer says the job is
still in progress it polls `job_status`; then it states the outcome. Each CLI's wire format
(Responses API, Gemini API) is a subclass's business.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mcp_helpers import approve
from serving import aat_serve, free_port
from sqlmodel import select

from webplatform.config import Settings
from webplatform.jobs.answers import IN_PROGRESS
from webplatform.jobs.tracking import pending_for
from webplatform.platform import Platform
from webplatform.store.engine import session_scope
from webplatform.store.models import Job

NODE_BIN = Path(__file__).parent / "node" / "node_modules" / ".bin"
SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "weekly report", "body": "All green."},
    "reason": "the user asked me to send the weekly report",
}
RUN = "run_tool_confirmed"
POLL = "job_status"
# A tool result as the wire gave it: (tool, result text, or an answer the wire already made).
ToolResult = tuple[str, str | dict[str, Any]]
# A model that keeps polling would loop forever; a real turn gives up much sooner.
MAX_POLLS = 8


@dataclass
class Seat:
    """Where the user sits: HOME, the project folder, and the environment the CLI runs in."""

    home: Path
    project: Path
    env: dict[str, str]

    @property
    def aat_home(self) -> Path:
        """aat's home when AAT_HOME is not set: under HOME."""
        return self.home / ".local" / "share" / "aat"

    def platform(self) -> Platform:
        """A platform on the seat's aat home, for approving and reading jobs from the test."""
        return Platform(Settings(home=self.aat_home))


def make_seat(tmp_path: Path) -> Seat:
    """A fresh seat under `tmp_path`: nothing of the test runner's own HOME or AAT_* leaks in."""
    home, project, scratch = tmp_path / "home", tmp_path / "project", tmp_path / "tmp"
    for folder in (home, project, scratch):
        folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
    # TMPDIR: Gemini CLI writes error reports there; keep them with the test.
    env.update({"HOME": str(home), "TMPDIR": str(scratch), "PWD": str(project)})
    return Seat(home=home, project=project, env=env)


@functools.cache
def aat_config(client: str) -> str:
    """What `aat config CLIENT` prints with aat's default settings. It depends on neither HOME
    nor the folder, so each client's block is made once per test process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
    done = subprocess.run(
        [sys.executable, "-m", "webplatform", "config", client],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout


@contextmanager
def serving(seat: Seat, log: Path, *, approval_wait_s: float | None = None) -> Iterator[str]:
    """`aat serve` on the seat's home (default approval wait unless given); yields its URL."""
    port = free_port()
    env = {**seat.env, "AAT_DASHBOARD_URL": f"http://127.0.0.1:{port}"}
    if approval_wait_s is not None:
        env["AAT_APPROVAL_WAIT_S"] = str(approval_wait_s)
    with aat_serve(env=env, port=port, log=log) as base:
        yield base


class Operator:
    """Approves the first job that waits for a decision, `delay_s` after it was queued (or,
    given `after`, `delay_s` after that event), in a thread; records when."""

    def __init__(self, seat: Seat, *, delay_s: float, after: threading.Event | None = None) -> None:
        self.platform = seat.platform()
        self.delay_s = delay_s
        self.after = after
        self.job: int | None = None
        self.queued_at: float | None = None
        self.approved_at: float | None = None
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Operator:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        self.platform.engine.dispose()

    def _run(self) -> None:
        try:
            self.job = self._wait_for_queued()
            self.queued_at = time.monotonic()
            if self.after is not None:
                while not self.after.wait(timeout=0.05):
                    if self.stop.is_set():
                        return
            if self.stop.wait(self.delay_s):
                return
            approve(self.platform, self.job)
            self.approved_at = time.monotonic()
        except BaseException as exc:  # the test reports it; a thread's traceback is lost
            self.error = exc

    def _wait_for_queued(self) -> int:
        deadline = time.monotonic() + 120
        while not (waiting := pending_for(platform=self.platform)):
            if time.monotonic() > deadline:
                raise TimeoutError("no job was queued for approval within 120 s")
            if self.stop.wait(0.05):
                raise LookupError("the client finished without queuing a job")
        return int(waiting[0]["job"])


def jobs_of(seat: Seat) -> list[Job]:
    """Every job in the seat's database."""
    platform = seat.platform()
    try:
        with session_scope(platform.engine, write=False) as session:
            return list(session.exec(select(Job)).all())
    finally:
        platform.engine.dispose()


def outbox_messages(seat: Seat) -> list[dict[str, Any]]:
    """The messages `outbox send-message` wrote (one JSON file each)."""
    folder = seat.aat_home / "outbox"
    if not folder.is_dir():
        return []
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def tool_answer(text: str) -> dict[str, Any]:
    """aat's JSON answer inside a tool result as a CLI hands it to its model (Codex prefixes a
    wall time, Gemini wraps it in <untrusted_context>); a ValueError naming the text if none."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError(f"no JSON answer in the tool result: {text[:500]!r}")
    answer: dict[str, Any] = json.loads(text[start : end + 1])
    return answer


def _answer_or_text(text: str) -> dict[str, Any]:
    """aat's answer, or (a CLI's own error, say) the text itself, for the test to show."""
    try:
        return tool_answer(text)
    except ValueError:
        return {"status": None, "text": text}


@dataclass
class Seen:
    """One tool result the model received: which tool, what aat answered, and when."""

    tool: str
    answer: dict[str, Any]
    at: float


@dataclass
class AgentTurn:
    """The scripted agent turn, independent of the wire: what to do after each tool result.

    `extra` is merged into every tool call's arguments (Gemini's `wait_for_previous`).
    """

    poll_wait_s: float = 20.0
    extra: dict[str, Any] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    called_at: list[float] = field(default_factory=list)
    polled: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, results: list[ToolResult]) -> tuple[str, dict[str, Any]] | str:
        """The next move, given every tool result so far: a call (tool, arguments) or the
        final text."""
        with self.lock:
            for tool, result in results[len(self.seen) :]:
                answer = result if isinstance(result, dict) else _answer_or_text(result)
                self.seen.append(Seen(tool=tool, answer=answer, at=time.monotonic()))
            if not self.seen:
                return self._call(RUN, SEND)
            last = self.seen[-1].answer
            job = last.get("job")
            polls = sum(1 for s in self.seen if s.tool == POLL)
            if last.get("status") in IN_PROGRESS and isinstance(job, int) and polls < MAX_POLLS:
                self.polled.set()
                return self._call(POLL, {"job": job, "wait_s": self.poll_wait_s})
            return f"The send-message job ended {last.get('status')}."

    def _call(self, tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.called_at.append(time.monotonic())
        return tool, {**args, **self.extra}

    def answers(self, tool: str) -> list[dict[str, Any]]:
        """What aat answered to each call of `tool`, in order."""
        return [s.answer for s in self.seen if s.tool == tool]


class ScriptedModel(ThreadingHTTPServer):
    """A loopback model endpoint serving in a thread; subclasses speak a CLI's API."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], turn: AgentTurn) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.turn = turn
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that reads JSON bodies, keeps them, and writes SSE or JSON."""

    server: ScriptedModel

    def read_json(self) -> dict[str, Any]:
        """The request's JSON body, kept on the server with its path."""
        request: dict[str, Any] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, request))
        return request

    def send_events(self, events: list[dict[str, Any]], *, named: bool) -> None:
        """Server-sent events, one JSON object each (`event:` lines when `named`)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for event in events:
            name = f"event: {event['type']}\n" if named else ""
            self.wfile.write(f"{name}data: {json.dumps(event)}\n\n".encode())
        self.close_connection = True

    def send_json(self, body: dict[str, Any]) -> None:
        """One JSON response."""
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002, ARG002
        """Quiet: the test reports what matters."""
