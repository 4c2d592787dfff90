"""Helpers and fixtures for the MCP bridge tests: platforms, clients in both eras, a worker."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult
from serving import uvicorn_in_thread
from starlette.applications import Starlette
from starlette.routing import Route
from stepup_helpers import job_step_up

from webplatform.config import Settings
from webplatform.jobs import decisions
from webplatform.jobs import states as jobs
from webplatform.mcp import approvals, build_server, create_mcp_app, waiting
from webplatform.mcp.transports.http import create_chat_mcp_app
from webplatform.platform import Platform
from webplatform.process import runner
from webplatform.store.engine import session_scope
from webplatform.store.models import Surface
from webplatform.worker import Worker

# The two protocol eras, as `Client(mode=...)` spells them.
ERAS = ["legacy", "2026-07-28"]


@pytest.fixture
def anyio_backend() -> str:
    """The SDK runs on asyncio here."""
    return "asyncio"


@pytest.fixture(autouse=True)
def quick_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress every 0.3 s instead of every 3 s, so waits in tests stay short."""
    monkeypatch.setattr(waiting, "PROGRESS_EVERY_S", 0.3)


@pytest.fixture(autouse=True)
def quick_queue_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The approval queue read every 0.1 s instead of every second for its subscribers."""
    monkeypatch.setattr(approvals, "WATCH_EVERY_S", 0.1)


@pytest.fixture
def mcp_settings(settings: Settings) -> Settings:
    """The test's settings (own AAT_HOME) with a short approval wait: a call nobody decides
    answers `pending_approval` after half a second. A test whose decision lands while the
    call waits makes the wait longer itself (`patient`, `approval_wait_s=30.0`)."""
    return settings.model_copy(update={"approval_wait_s": 0.5})


@pytest.fixture
def platform_settings(
    mcp_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """`platform` on the test's own database and the example registry, run from `tmp_path`.

    The stdio bridge's workspace is the folder it was started in: here the test's `tmp_path`,
    as a client started in a project folder would have it.
    """
    monkeypatch.chdir(tmp_path)
    return mcp_settings


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    """Each test using this runs in the legacy and in the modern protocol era."""
    return str(request.param)


@asynccontextmanager
async def connect(platform: Platform, era: str, **kwargs: Any) -> AsyncIterator[Client]:
    """An in-memory SDK client on a fresh bridge for `platform`."""
    server = build_server(platform, surface=Surface.mcp_stdio)
    async with Client(server, mode=era, **kwargs) as client:
        yield client


@contextmanager
def serve_mcp(platform: Platform) -> Iterator[str]:
    """`/mcp` and `/mcp/chat` mounted in a host app, as `aat serve` mounts them, on a real
    uvicorn server in a thread; yields the base URL."""
    mcp_app, mcp_lifespan = create_mcp_app(platform)
    chat_app, chat_lifespan = create_chat_mcp_app(platform)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp_lifespan(), chat_lifespan():
            yield

    app = Starlette(
        routes=[Route("/mcp", endpoint=mcp_app), Route("/mcp/chat", endpoint=chat_app)],
        lifespan=lifespan,
    )
    with uvicorn_in_thread(app) as base:
        yield base


def body(result: CallToolResult) -> dict[str, Any]:
    """The JSON body of a tool result, checking that text and structuredContent agree."""
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


@pytest.fixture
def worker(platform: Platform) -> Iterator[Worker]:
    """An embedded worker thread executing approved jobs."""
    w = Worker(
        engine=platform.engine,
        settings=platform.settings,
        load_registry=platform.registry,
        run=runner.run,
    )
    thread, stop = w.start_thread()
    yield w
    stop.set()
    thread.join(timeout=10)


def approve(platform: Platform, job_id: int, operator: str = "olga") -> None:
    """Approve a job as an operator in the dashboard would (after their password step-up)."""
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        digest = job.args_digest
    decisions.approve(
        platform=platform,
        job_id=job_id,
        operator=operator,
        digest=digest,
        address=None,
        step_up=job_step_up(platform, job_id, operator),
    )


def deny(platform: Platform, job_id: int, reason: str, operator: str = "olga") -> None:
    """Deny a job with a reason."""
    decisions.deny(platform=platform, job_id=job_id, operator=operator, reason=reason, address=None)


def later(delay_s: float, fn: Callable[[], None]) -> threading.Thread:
    """Run `fn` after `delay_s` in a thread (an operator deciding while a call waits)."""

    def go() -> None:
        threading.Event().wait(delay_s)
        fn()

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


def later_when(ready: Callable[[], object], fn: Callable[[], None]) -> threading.Thread:
    """Run `fn` in a thread as soon as `ready()` is true: an operator deciding once the test
    has seen the call wait (its first progress, the dialog it asked for). After 30 s `fn`
    runs anyway, and the test's own checks say what did not happen."""

    def go() -> None:
        deadline = time.monotonic() + 30
        while not ready() and time.monotonic() < deadline:
            threading.Event().wait(0.01)
        fn()

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def registry_root(tmp_path: Path) -> Path:
    """An empty registry root the test fills with manifests (beside the workspace `tmp_path`)."""
    root = tmp_path.parent / f"{tmp_path.name}-registry"
    for sub in ("tools", "agents", "skills"):
        (root / sub).mkdir(parents=True)
    return root


def aat_mcp_process(settings: Settings, **extra: str) -> StdioServerParameters:
    """A real `aat mcp` process on `settings`' home, database and workspaces (plus `extra`
    AAT_* variables), for the SDK's stdio client."""
    env = {
        **os.environ,
        "AAT_HOME": str(settings.home),
        "AAT_DB_URL": settings.db_url.get_secret_value(),
        "AAT_WORKSPACES": settings.workspaces,
        **extra,
    }
    return StdioServerParameters(command=sys.executable, args=["-m", "webplatform", "mcp"], env=env)
