"""Claude Code's terminal UI (from npm, tests/mcp/node) gets an approval through aat.

Claude Code runs in tmux with its default settings. Prepared beforehand is only what a first
start asks once (onboarding done, this API key accepted, this folder trusted) and what a
user pastes: the project's `.mcp.json` is `aat config claude` as printed, and the project
server is approved in `.claude/settings.local.json`, as Claude Code's own "Use this MCP
server" choice saves it. The model is a scripted Anthropic Messages endpoint in this process
(streaming SSE on 127.0.0.1): it loads `run_tool_confirmed` with ToolSearch (Claude Code
defers MCP tools), calls it on `outbox send-message`, and ends the turn saying what aat
answered. The test answers Claude Code's own prompts with the keyboard, as a user would
(auto mode, the default, cannot reach its server-side check through this endpoint, so Claude
Code asks the user about the call). An operator approves in Chromium (the dashboard, with the
password step-up) on the `aat serve` that the client's `aat mcp` hands its session to; the
model must see `succeeded`, and exactly one message is in the outbox.

Two paths: Claude Code as installed declares the Tasks extension, moves the task to the
background, polls `tasks/get` and tells the model the result when the task ends; with
CLAUDE_CODE_DISABLE_MCP_TASKS=1, aat asks it to open the job page (URL elicitation), the
user answers "I'm done, continue", and the call waits for the decision; a person's Decline
there withdraws the request instead. Claude Code's debug log (`--debug-file`) and the
model's requests are kept in the test's tmp_path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect, sync_playwright
from serving import aat_serve, free_port
from sqlmodel import Session, select

from webplatform.config import Settings
from webplatform.jobs.withdrawal import DECLINED_IN_CLIENT
from webplatform.store import make_engine
from webplatform.store.models import Job, JobState

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.browser,  # the approval is given in Chromium
    pytest.mark.timeout(240),
]

CLAUDE = Path(__file__).parent / "node" / "node_modules" / ".bin" / "claude"
CHROMIUM = "/usr/bin/chromium"
OPERATOR, PASSWORD = "alice", "correct horse battery"
API_KEY = "sk-ant-scripted-not-a-secret"
RUN_CONFIRMED = "mcp__aat__run_tool_confirmed"
MESSAGE = {"to": "ops@example.org", "subject": "from claude code", "body": "hello"}
SEND = {"tool": "outbox", "action": "send-message", "args": MESSAGE}
PROMPT = "Send ops@example.org a hello through aat."
# Claude Code's screens, as this version words them.
AUTO_MODE_DIALOG = "Enter to stay in auto mode"
PERMISSION_PROMPT = "Do you want to proceed?"
# Claude Code's tool result for a call it turned into a background task.
BACKGROUNDED = "moved to the background"
URL_DIALOG = "wants to open a URL"
# How long a person reads a dialog before answering it.
READING_S = 1.5


class MessagesScript(ThreadingHTTPServer):
    """An Anthropic Messages endpoint (`POST /v1/messages`, streamed) playing one agent turn.

    No tool result yet: call ToolSearch for `run_tool_confirmed`. ToolSearch's result: call
    `run_tool_confirmed` on `outbox send-message`. aat's answer, in that call's result or, when
    Claude Code moved the call to the background as a task, in the task notification it sends
    when the task ends: end the turn with one line saying the status and job. A result saying
    the call went to the background: say so and wait. Every request is kept, and every answer
    of aat's the model was given.
    """

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), MessagesHandler)
        self.requests: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def reply(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """The content blocks and stop reason of the model's next message."""
        with self.lock:
            self.requests.append(request)
            return self._next(request["messages"])

    def _next(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
        blocks = new_input(messages)
        notice = task_result(blocks)
        done = {b["tool_use_id"]: result_text(b) for b in blocks if b.get("type") == "tool_result"}
        if notice is not None:
            return self._tell(notice)
        if "toolu_send" in done:
            if BACKGROUNDED in done["toolu_send"]:
                return say("aat is waiting for an operator; I will report the outcome.")
            return self._tell(done["toolu_send"])
        if "toolu_search" in done:
            return [tool_use("toolu_send", RUN_CONFIRMED, SEND)], "tool_use"
        if any(m["role"] == "assistant" for m in messages):
            return say("Still waiting.")  # a reminder with nothing new in it
        search = {"query": f"select:{RUN_CONFIRMED}", "max_results": 5}
        return [tool_use("toolu_search", "ToolSearch", search)], "tool_use"

    def _tell(self, text: str) -> tuple[list[dict[str, Any]], str]:
        try:
            answer = json.loads(text)
        except ValueError:
            return say(f"The aat call failed: {text[:200]}")
        self.answers.append(answer)
        return say(f"aat answered {answer.get('status')} for job {answer.get('job')}.")


def new_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The content blocks sent since the model last spoke (Claude Code may split them over
    several messages: a tool result, then "Tool loaded.", then a reminder)."""
    blocks: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message["role"] == "assistant":
            break
        content = message["content"]
        blocks[:0] = content if isinstance(content, list) else [{"type": "text", "text": content}]
    return blocks


def task_result(blocks: list[dict[str, Any]]) -> str | None:
    """The result carried by a task notification among `blocks`, if there is one."""
    for block in blocks:
        if block.get("type") == "text" and "<task-notification>" in block["text"]:
            found = re.search(r"<result>\s*(.*?)\s*</result>", block["text"], re.DOTALL)
            return found.group(1) if found else block["text"]
    return None


def result_text(result: dict[str, Any]) -> str:
    """A tool result's text, whether Claude Code sent it as a string or as blocks."""
    content = result.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def say(text: str) -> tuple[list[dict[str, Any]], str]:
    return [{"type": "text", "text": text}], "end_turn"


def tool_use(use_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": arguments}


class MessagesHandler(BaseHTTPRequestHandler):
    """Streams the script's reply as Messages API server-sent events."""

    server: MessagesScript

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
            self.send_error(404)
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not request.get("stream"):
            # Claude Code streams every turn; a plain request means this script is out of date.
            self.send_error(400, "this scripted endpoint only streams")
            return
        blocks, stop = self.server.reply(request)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for event in stream_events(blocks, stop):
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002, ARG002
        """Quiet: the test reports what matters."""


def stream_events(blocks: list[dict[str, Any]], stop: str) -> Iterator[dict[str, Any]]:
    """The Messages API event stream of one assistant message made of `blocks`."""
    # A fresh id each time: Claude Code merges the assistant messages that share one.
    message: dict[str, Any] = {"id": f"msg_{uuid.uuid4().hex}", "type": "message"}
    message |= {"role": "assistant", "model": "claude-scripted", "content": []}
    message |= {"stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
    yield {"type": "message_start", "message": message}
    for index, block in enumerate(blocks):
        start: dict[str, Any] = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block.get("input"))}
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield {"type": "content_block_start", "index": index, "content_block": start}
        yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    end = {"stop_reason": stop, "stop_sequence": None}
    yield {"type": "message_delta", "delta": end, "usage": {"output_tokens": 5}}
    yield {"type": "message_stop"}


@pytest.fixture
def model(tmp_path: Path) -> Iterator[MessagesScript]:
    """The scripted Messages endpoint, serving in a thread."""
    server = MessagesScript()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    # What the model was sent, for reading after a failure.
    (tmp_path / "model-requests.json").write_text(json.dumps(server.requests, indent=1))
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@dataclass(frozen=True)
class Dashboard:
    """A running `aat serve` for the test's AAT_HOME, with operator alice."""

    url: str
    home: Path
    env: dict[str, str]

    def jobs(self) -> list[Job]:
        engine = make_engine(Settings(home=self.home))
        try:
            with Session(engine) as session:
                return list(session.exec(select(Job).order_by(Job.id)).all())  # type: ignore[arg-type]
        finally:
            engine.dispose()

    def outbox(self) -> list[Path]:
        folder = self.home / "outbox"
        return sorted(folder.glob("*.json")) if folder.exists() else []


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    """`aat serve` with its defaults but the address it is reached at, and one operator."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AAT_", "CLAUDE", "ANTHROPIC"))}
    env |= {"AAT_HOME": str(tmp_path / "aat-home"), "AAT_DASHBOARD_URL": f"http://127.0.0.1:{port}"}
    subprocess.run(
        [sys.executable, "-m", "webplatform", "operator", "add", OPERATOR, "--password-stdin"],
        input=PASSWORD + "\n",
        text=True,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    with aat_serve(env=env, port=port, log=tmp_path / "serve.log") as url:
        yield Dashboard(url=url, home=tmp_path / "aat-home", env=env)


def aat_config_claude(env: dict[str, str]) -> dict[str, Any]:
    """What `aat config claude` prints, parsed."""
    out = subprocess.run(
        [sys.executable, "-m", "webplatform", "config", "claude"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    config: dict[str, Any] = json.loads(out.stdout)
    return config


@pytest.fixture
def project(tmp_path: Path, dashboard: Dashboard) -> Path:
    """A project folder whose `.mcp.json` is `aat config claude`, its server approved."""
    folder = tmp_path / "project"
    (folder / ".claude").mkdir(parents=True)
    (folder / ".mcp.json").write_text(json.dumps(aat_config_claude(dashboard.env), indent=2))
    approved = {"enabledMcpjsonServers": ["aat"]}
    (folder / ".claude" / "settings.local.json").write_text(json.dumps(approved, indent=2))
    return folder


def claude_env(
    tmp_path: Path, project: Path, dashboard: Dashboard, model: MessagesScript
) -> dict[str, str]:
    """Claude Code's environment: a throwaway HOME whose config says the first start is done,
    the scripted endpoint, nothing else on the network; aat's variables as the server has
    them, so the bridge Claude Code starts hands its session to that server."""
    home = tmp_path / "home"
    home.mkdir()
    config = {
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": claude_version(),
        "theme": "dark",
        # Claude Code asks once whether to use an API key from the environment, and keeps
        # the answer by the key's last 20 characters.
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {str(project): {"hasTrustDialogAccepted": True}},
    }
    (home / ".claude.json").write_text(json.dumps(config, indent=2))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC", "XDG_"))}
    return env | {
        **{k: v for k, v in dashboard.env.items() if k.startswith("AAT_")},
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": API_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def claude_version() -> str:
    out = subprocess.run([str(CLAUDE), "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.split()[0]


class Screen:
    """Claude Code's terminal UI in a tmux session on a private socket, read and typed into
    as a user would."""

    def __init__(self, *, cwd: Path, env: dict[str, str], debug_log: Path) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="aat-tmux-"))  # short: a socket path
        self.socket = str(self.folder / "s")
        self.debug_log = debug_log
        # The tmux server started here gives the session this environment.
        command = [str(CLAUDE), "--debug-file", str(debug_log)]
        self.tmux(
            "new-session", "-d", "-x", "200", "-y", "50", "-c", str(cwd), "--", *command, env=env
        )

    def tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            ["tmux", "-S", self.socket, *args], env=env, capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, f"tmux {args[0]}: {done.stderr}"
        return done.stdout

    def text(self) -> str:
        """What the screen shows now, blank lines left out."""
        shown = self.tmux("capture-pane", "-p")
        return "\n".join(line.rstrip() for line in shown.splitlines() if line.strip())

    def wait_for(self, pattern: str, timeout_s: float = 60) -> str:
        """The screen, once it shows `pattern` (a regular expression)."""
        deadline = time.monotonic() + timeout_s
        while not re.search(pattern, shown := self.text()):
            if time.monotonic() > deadline:
                pytest.fail(f"the screen never showed {pattern!r}:\n{shown}\n{self.aat_log()}")
            time.sleep(0.2)
        return shown

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-l", text)
        time.sleep(0.3)  # let the input box take the text before Enter submits it
        self.keys("Enter")

    def answer(self, dialog: str, option: str, key: str) -> str:
        """Once `dialog` shows: read it as a person would (Claude Code ignores keys pressed
        right after a dialog appears), move its selection (❯) to `option` with `key`, confirm,
        and see the dialog go. Returns the dialog's screen."""
        shown = self.wait_for(dialog)
        time.sleep(READING_S)
        for _ in range(6):
            if re.search(rf"❯\s*{re.escape(option)}", self.text()):
                self.keys("Enter")
                self.wait_gone(dialog)
                return shown
            self.keys(key)
            time.sleep(0.3)
        pytest.fail(f"could not select {option!r}:\n{self.text()}")

    def wait_gone(self, pattern: str, timeout_s: float = 10) -> None:
        deadline = time.monotonic() + timeout_s
        while re.search(pattern, shown := self.text()):
            if time.monotonic() > deadline:
                pytest.fail(f"the screen still shows {pattern!r}:\n{shown}")
            time.sleep(0.2)

    def aat_log(self) -> str:
        """Claude Code's debug lines about the aat server."""
        lines = self.debug_log.read_text().splitlines() if self.debug_log.exists() else []
        return "\n".join(line[:400] for line in lines if '"aat"' in line or "aat" in line[:120])

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def start_claude(
    tmp_path: Path, project: Path, dashboard: Dashboard, model: MessagesScript
) -> Iterator[Any]:
    """Starts Claude Code in tmux (with extra environment variables), once aat is connected."""
    screens: list[Screen] = []

    def start(**extra: str) -> Screen:
        env = claude_env(tmp_path, project, dashboard, model) | extra
        screen = Screen(cwd=project, env=env, debug_log=tmp_path / "claude-debug.log")
        screens.append(screen)
        deadline = time.monotonic() + 60
        while 'MCP server "aat": Successfully connected' not in screen.aat_log():
            if time.monotonic() > deadline:
                pytest.fail(
                    f"Claude Code did not connect to aat:\n{screen.text()}\n{screen.aat_log()}"
                )
            time.sleep(0.2)
        screen.wait_for(r"❯")
        return screen

    yield start
    for screen in screens:
        print(f"--- Claude Code's last screen ---\n{screen.text()}")
        screen.close()


def approve_in_chromium(url: str, job_id: int) -> None:
    """Log in as the operator, and approve job `job_id` with the password step-up."""
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.goto(f"{url}/approvals")
            page.fill("input[name=username]", OPERATOR)
            page.fill("input[name=password]", PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url(f"{url}/approvals")
            card = page.locator(f'article.card[data-job-id="{job_id}"]')
            expect(card).to_contain_text("outbox send-message")
            expect(card).to_contain_text(MESSAGE["subject"])
            card.locator(".approve-form input[name=password]").fill(PASSWORD)
            card.get_by_role("button", name="Approve", exact=True).click()
            expect(page.locator("#notice")).to_contain_text(f"Approved job {job_id}.")
        finally:
            browser.close()


def pending_job(dashboard: Dashboard, screen: Screen, timeout_s: float = 30) -> int:
    """The id of the one job waiting for approval, once it is queued."""
    deadline = time.monotonic() + timeout_s
    while not (jobs := dashboard.jobs()) or jobs[-1].state != JobState.pending_approval:
        if time.monotonic() > deadline:
            states = [(j.id, j.state, j.reason) for j in jobs]
            pytest.fail(f"no job waits for approval: {states}\n{screen.text()}\n{screen.aat_log()}")
        time.sleep(0.2)
    [job] = jobs
    assert job.id is not None
    return job.id


def ask_and_allow(screen: Screen) -> None:
    """Type the prompt and let the call through Claude Code's own checks, as a user does:
    auto mode (the default) cannot reach its safety check through this endpoint, so Claude
    Code asks once to stay in auto mode and approve actions by hand, then asks for this one."""
    screen.type(PROMPT)
    screen.wait_for(AUTO_MODE_DIALOG)
    time.sleep(READING_S)
    screen.keys("Enter")
    screen.wait_gone(AUTO_MODE_DIALOG)
    print(f"--- Claude Code asks ---\n{screen.answer(PERMISSION_PROMPT, 'Yes', 'Down')}")


def task_view(screen: Screen) -> str:
    """Open the running task from the footer ("↓ to manage", Enter), as a user looking for
    what the call waits on would, and go back to the prompt (Esc to the task list, Esc to
    close it). Returns the task's screen."""
    screen.wait_for("↓ to manage")
    screen.keys("Down")
    screen.wait_for("enter to view tasks")
    screen.keys("Enter")
    shown = screen.wait_for(r"Status:.*working")
    screen.keys("Escape")
    screen.wait_for("Esc to close")
    screen.keys("Escape")
    screen.wait_for("↓ to manage")
    return shown


def assert_one_message_sent(dashboard: Dashboard, model: MessagesScript, job_id: int) -> None:
    """The model saw `succeeded` for the one job, which sent exactly one message."""
    assert [(a["status"], a["job"]) for a in model.answers] == [("succeeded", job_id)]
    [job] = dashboard.jobs()
    assert (job.id, job.state, job.decided_by) == (job_id, JobState.succeeded, OPERATOR)
    [sent] = dashboard.outbox()
    assert json.loads(sent.read_text())["subject"] == MESSAGE["subject"]


def test_claude_code_default_tasks_round_trip(
    start_claude: Any, dashboard: Dashboard, model: MessagesScript
) -> None:
    """Claude Code as installed declares the Tasks extension: the queued call becomes a task,
    which Claude Code moves to the background and polls while the operator decides; the
    model is told when it ends, with `succeeded`."""
    screen: Screen = start_claude()
    ask_and_allow(screen)
    job_id = pending_job(dashboard, screen)
    print(f"--- while the call waits ---\n{screen.wait_for('aat is waiting for an operator')}")
    assert "(working); backgrounded as" in screen.aat_log(), "the call became a task"
    view = task_view(screen)
    print(f"--- the task, as Claude Code shows it ---\n{view}")
    assert f"job {job_id} waits for an operator's approval: {dashboard.url}/jobs/{job_id}" in view
    approve_in_chromium(dashboard.url, job_id)
    print(f"--- the end of the turn ---\n{screen.wait_for(f'answered succeeded for job {job_id}')}")
    assert_one_message_sent(dashboard, model, job_id)


def test_claude_code_url_dialog_round_trip(
    start_claude: Any, dashboard: Dashboard, model: MessagesScript
) -> None:
    """Without Tasks, aat asks Claude Code to open the job page: the user answers "I'm done,
    continue", the call waits for the decision, and the model sees `succeeded`."""
    screen: Screen = start_claude(CLAUDE_CODE_DISABLE_MCP_TASKS="1")
    ask_and_allow(screen)
    dialog = screen.answer(URL_DIALOG, "I'm done, continue", "Right")
    print(f"--- aat's URL dialog ---\n{dialog}")
    job_id = pending_job(dashboard, screen)
    assert f"{dashboard.url}/jobs/{job_id}" in dialog
    approve_in_chromium(dashboard.url, job_id)
    print(f"--- the end of the turn ---\n{screen.wait_for(f'answered succeeded for job {job_id}')}")
    assert_one_message_sent(dashboard, model, job_id)


def test_claude_code_url_dialog_decline_withdraws_the_request(
    start_claude: Any, dashboard: Dashboard, model: MessagesScript
) -> None:
    """A person who declines aat's URL dialog withdraws the request: the job ends denied
    without any operator, nothing is sent, and the model is told."""
    screen: Screen = start_claude(CLAUDE_CODE_DISABLE_MCP_TASKS="1")
    ask_and_allow(screen)
    screen.answer(URL_DIALOG, "Decline", "Right")
    shown = screen.wait_for(r"aat answered \w+ for job \d+")
    print(f"--- the end of the turn ---\n{shown}")
    [job] = dashboard.jobs()
    assert (job.state, job.reason) == (JobState.denied, DECLINED_IN_CLIENT)
    assert [(a["status"], a["job"]) for a in model.answers] == [("denied", job.id)]
    assert dashboard.outbox() == []
