"""Helpers for the browser tests: the server and attacker handles, environment, ports, an MCP
client asking in the background, and a job's state as its page shows it."""

from __future__ import annotations

import asyncio
import getpass
import json
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Browser, Page, expect
from serving import aat_env
from sqlmodel import Session, col, select

from webplatform.config import Settings
from webplatform.jobs import previews, resolution, services
from webplatform.jobs.answers import answered
from webplatform.platform import Actor, Platform
from webplatform.registry.validation import parse_text_args
from webplatform.store.agents import add_agent
from webplatform.store.models import UNFINISHED_STATES, Job, Surface
from webplatform.store.operators import add_operator
from webplatform.trust.authority import seal_for
from webplatform.trust.ledger import LEDGER_FILE
from webplatform.trust.permissions import ROLE_BOOK

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
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    def outbox(self) -> list[Path]:
        """The message files the outbox tool wrote."""
        folder = self.home / "outbox"
        return sorted(folder.glob("*.json")) if folder.exists() else []

    def settle(self, timeout_s: float = 30) -> dict[int, int]:
        """Wait until nothing is left to run (no job waits for an operator or a worker, none
        runs), stop `aat serve` as a service manager does (SIGTERM: what runs is finished)
        and return how many runs each job's decisions started, from this host's decision
        ledger (a worker records each run there before its tool starts). With the server
        gone nothing runs any more, so what a test counts afterwards stays exact."""
        platform = Platform(Settings(home=self.home))
        unfinished = select(Job.id).where(col(Job.state).in_(UNFINISHED_STATES))
        deadline = time.monotonic() + timeout_s
        try:
            while left := platform.transact(lambda s: list(s.exec(unfinished)), write=False):
                assert time.monotonic() < deadline, f"jobs {left} never finished"
                time.sleep(0.1)
        finally:
            platform.engine.dispose()
        assert self.process is not None, "this server was not started by the fixture"
        self.process.terminate()
        # uvicorn shuts down gracefully, then ends itself by the signal it was sent.
        ended = self.process.wait(timeout=30)
        assert ended in (0, -signal.SIGTERM), self.log.read_text(errors="replace")
        ledger = self.home / LEDGER_FILE
        lines = ledger.read_text().splitlines() if ledger.exists() else []
        return dict(Counter(json.loads(line)["job"] for line in lines if line.strip()))


def log_in(chromium: Browser, base: str, name: str) -> Page:
    """A page in a fresh browser context, logged in as `name` through the login form, on the
    approvals page (close it with `page.context.close()`)."""
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/approvals")
    assert "/login" in page.url
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/approvals")
    return page


def serve_env(home: Path, port: int) -> dict[str, str]:
    """`aat serve`'s environment for the browser tests: calls wait 40 s for a decision."""
    return aat_env(
        home,
        AAT_DASHBOARD_URL=f"http://127.0.0.1:{port}",
        AAT_APPROVAL_WAIT_S="40",
        AAT_HEARTBEAT_S="0.5",
    )


def add_to_store(
    home: Path, operators: list[tuple[str, str | None]], agents: dict[str, str] | None = None
) -> dict[str, str]:
    """Operators (password PASSWORD; role None: the default) and agent tokens (name: owner)
    written into HOME's database from this process, as `aat operator add` and `aat agent add`
    would write them, without a process start each. Returns the agents' tokens by name."""
    agents = agents or {}
    platform = Platform(Settings(home=home))
    seal = seal_for(platform)  # the rows are signed, as aat's own commands sign them

    def write(session: Session) -> dict[str, str]:
        for name, role in operators:
            add_operator(
                session=session,
                name=name,
                password=PASSWORD,
                roles=ROLE_BOOK.giving(role),
                seal=seal,
            )
        minted = [add_agent(session=session, name=n, owner=o, seal=seal) for n, o in agents.items()]
        return {row.name: token for row, token in minted}

    try:
        return platform.transact(write)
    finally:
        platform.engine.dispose()


@dataclass
class Attacker:
    """A web page on another loopback port (another origin, same site)."""

    url: str
    html: dict[str, str]


def queue_directly(server: Server, subject: str = "s") -> int:
    """Queue an irreversible `outbox send-message` as `aat run --no-wait` does; its job id."""
    return run_no_wait(server, "send-message", to="x@example.org", subject=subject, body="b")


def run_no_wait(server: Server, action: str, **raw: str) -> int:
    """Queue `aat run outbox ACTION --NAME VALUE... --no-wait` from this process: the same
    request, surface and client name, with its preview landed before it returns, as the
    command's process waits for it before exiting. An `aat` process per call cost about a
    CPU-second of imports, several times a test. Returns the job id."""
    env = server.env or serve_env(server.home, server.port)
    # The command's settings: its environment's AAT_* variables (another registry, say).
    settings = Settings.model_validate(
        {k[4:].lower(): v for k, v in env.items() if k[:4] == "AAT_"}
    )
    platform = Platform(settings)
    try:
        _spec, found = resolution.resolve_call(platform.registry(), "tool", "outbox", action)
        args, problems = parse_text_args(found, raw)
        assert not problems, problems.line
        actor = Actor(surface=Surface.cli, client=f"aat run ({getpass.getuser()})", cwd=Path.cwd())
        answer = answered(
            services.request_run,
            platform=platform,
            call=services.RunCall(kind="tool", name="outbox", action=found.name, args=args),
            actor=actor,
            consent=services.Consent.QUEUE,
        )
        assert answer.job is not None, answer
        previews.wait_all(settings.preview_timeout_s + 5)
        return answer.job
    finally:
        platform.engine.dispose()


class McpCall(threading.Thread):
    """`run_tool_confirmed` of `outbox send-message` from an SDK client over HTTP (with the
    agent's `reason` and agent `token` when given), waiting in the background: sync
    Playwright holds this thread's event loop."""

    def __init__(
        self, server: Server, args: dict[str, Any], *, reason: str = "", token: str = ""
    ) -> None:
        super().__init__(daemon=True)
        self.url = f"{server.url}/mcp"
        self.arguments: dict[str, Any] = {"tool": "outbox", "action": "send-message"}
        self.arguments.update({"args": args, **({"reason": reason} if reason else {})})
        self.token = token
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = asyncio.run(self._call())
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc

    async def _call(self) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        # A call waiting for its decision gets no bytes until then: not httpx's 5 s read
        # timeout, which a loaded machine's browser steps before the decision can outlast.
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60))
        async with http, Client(streamable_http_client(self.url, http_client=http)) as client:
            result = await client.call_tool("run_tool_confirmed", self.arguments)
            assert result.structured_content is not None
            return dict(result.structured_content)

    def answer(self, timeout: float = 45) -> dict[str, Any]:
        self.join(timeout)
        if self.error is not None:
            raise self.error
        assert self.result is not None, "the MCP call did not return"
        return self.result


def job_state(page: Page, base: str, job_id: int) -> str:
    """The state the job page shows (the page is left open on it)."""
    page.goto(f"{base}/jobs/{job_id}")
    return page.locator("h1 .state").inner_text()


def wait_state(page: Page, base: str, job_id: int, want: str, timeout_s: float = 30) -> None:
    """Reload the job page until it shows state `want`."""
    deadline = time.monotonic() + timeout_s
    while (state := job_state(page, base, job_id)) != want:
        assert time.monotonic() < deadline, f"job {job_id} stayed {state}, not {want}"
        time.sleep(0.3)


MESSAGE = {"to": "bob@example.org", "subject": "Quarterly report", "body": "Numbers attached."}


def new_card(page: Page) -> tuple[Any, int]:
    """The newest card on the approvals page, once it shows, and its job id."""
    card = page.locator("article.card[data-job-id]").first
    # The queue polls every second, so a card shows within about a second of its job being
    # recorded; the wait also covers the MCP client's own start in its thread, which a loaded
    # machine stretches past any tight bound. How soon it shows is B3's to measure.
    expect(card).to_be_visible(timeout=15_000)
    job_id = int(card.get_attribute("data-job-id") or "0")
    card = page.locator(f"#card-{job_id}")
    # An operator decides on the preview, not on "preview pending": an approval given while
    # it was pending binds that, and the call would come back to the card (SPEC §20).
    expect(card.locator('[data-preview-state="pending"]')).to_have_count(0, timeout=15_000)
    return card, job_id


def wait_for_refresh(page: Page, times: int = 1) -> None:
    """Let the approval queue's poll swap its block `times` times. Focus leaves the queue
    first: while a decision is being typed in it, the refresh waits (static/app.js)."""
    for _ in range(times):
        page.evaluate(
            """() => {
                if (document.activeElement) { document.activeElement.blur(); }
                document.getElementById("approvals-live").dataset.before = "1";
            }"""
        )
        page.wait_for_function(
            '() => !(document.getElementById("approvals-live") || {dataset: {}}).dataset.before',
            timeout=15_000,
        )
