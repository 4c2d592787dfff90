"""The dashboard application: `create_app(settings)` builds it; `aat serve` runs it.

Its lifespan leaves a heartbeat (so a queued MCP call can tell whether anyone can approve),
runs an embedded worker for approved jobs, and serves the MCP bridge at `/mcp`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

import webplatform.trust.authority  # noqa: F401  (installs the seal `platform.seal()` makes)
from dashboard import auth, similar
from dashboard.assets import STATIC_DIR
from dashboard.data import operator_role, pending_count, unsigned_approval
from dashboard.errors import install_error_pages
from dashboard.render import Pages, build_environment
from dashboard.routes import ROUTERS
from dashboard.security import Guard, GuardConfig
from dashboard.urls import RootPath
from webplatform.config import Settings
from webplatform.housekeeping import Housekeeper
from webplatform.mcp.transports.http import create_chat_mcp_app, create_mcp_app
from webplatform.mcp.transports.local import local_sessions
from webplatform.mcp.transports.oauth import oauth_routes
from webplatform.platform import Platform
from webplatform.store.notify import StopEvent
from webplatform.trust import claims, signing
from webplatform.worker import Worker, make_worker

log = logging.getLogger("aat.dashboard")


def create_app(
    settings: Settings,
    *,
    platform: Platform | None = None,
    embed_worker: bool = True,
    mcp: bool = True,
    local_socket: bool = False,
) -> FastAPI:
    """The dashboard as an ASGI app, with `/mcp` mounted when `mcp` is true.

    Nothing starts until the app's lifespan runs (the server starts it): then the heartbeat,
    the embedded worker (`embed_worker`) and the MCP session manager start, and they stop
    with it. `local_socket`: also serve `aat mcp` sessions handed over on the socket in
    `AAT_HOME` (`webplatform.mcp.transports.local`), as `aat serve` does.
    """
    platform = platform or Platform(settings)
    # The decision key is made on the dashboard's first start, before anyone can approve;
    # authority rows from before rows were signed are adopted then, once (SECURITY.md).
    signing.signer_for(settings.home)
    platform.seal()
    mcp_app, mcp_lifespan = _mcp_parts(platform) if mcp else (None, None)
    chat_app, chat_lifespan = create_chat_mcp_app(platform) if mcp else (None, None)
    lifespans: list[Callable[[], AbstractAsyncContextManager[Any]]] = [
        part for part in (mcp_lifespan, chat_lifespan) if part is not None
    ]
    if local_socket:
        lifespans.append(lambda: local_sessions(platform))
    lifespan = _lifespan(platform, embed_worker=embed_worker, parts=lifespans)
    app = FastAPI(
        title="aat dashboard", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    _set_state(app, platform, settings)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    if mcp_app is not None:
        # A plain route, not a mount: `/mcp` itself must answer, without a slash redirect.
        app.router.routes.append(Route("/mcp", endpoint=mcp_app))
    if chat_app is not None:  # the curated chat surface (chat_surface.yaml)
        app.router.routes.append(Route("/mcp/chat", endpoint=chat_app))
    if mcp:  # agents sign in through the browser (SPEC §18)
        app.router.routes.extend(oauth_routes(platform))
    for router in ROUTERS:
        # The routers' routes as they are (no prefix, no dependencies added), built once at
        # import: `include_router` would have FastAPI rebuild every route's dependants and
        # fields again for each app, ~60 ms of CPU on its first request (tests make hundreds).
        app.router.routes.extend(router.routes)
    install_error_pages(app)

    def find_operator(token: str) -> str | None:
        return auth.operator_for_token(platform, token)

    app.add_middleware(
        Guard,
        config=GuardConfig(
            extra_hosts=tuple(settings.extra_allowed_hosts), find_operator=find_operator
        ),
    )
    # Added last, so it runs first: the guard and the routes already see the root path.
    app.add_middleware(RootPath, root=settings.root_path)
    return app


def _lifespan(
    platform: Platform,
    *,
    embed_worker: bool,
    parts: list[Callable[[], AbstractAsyncContextManager[Any]]],
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the housekeeping thread, the embedded worker's (`embed_worker`)
    and the `parts` (MCP session managers, the local socket) run while the app serves, and
    stop with it."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        stop = StopEvent()  # wakes the sleeping threads at once
        # The embedded worker leaves the duties (and its heartbeat) to the housekeeper.
        worker = make_worker(platform, housekeeping=False) if embed_worker else None
        threads = [_start("aat-housekeeping", _housekeeping_loop(worker), platform, stop)]
        if worker is not None:
            threads.append(_start("aat-worker", _worker_loop(worker), platform, stop))
        async with AsyncExitStack() as stack:
            for part in parts:
                await stack.enter_async_context(part())
            try:
                yield
            finally:
                stop.set()
                for thread in threads:
                    thread.join(timeout=5)

    return lifespan


def _set_state(app: FastAPI, platform: Platform, settings: Settings) -> None:
    """What the routes' dependencies read from `app.state` (dashboard/deps.py)."""
    app.state.platform = platform
    app.state.settings = settings
    app.state.pages = Pages(
        build_environment(),
        pending_count=lambda: pending_count(platform),
        role_of=lambda name: operator_role(platform, name),
    )
    # Every page warns while the operator lets tools run unconfined (SPEC §14, §17).
    app.state.pages.env.globals["unconfined"] = settings.unconfined
    # The card's Approve and allow similar form, when a rule can be made of its call (SPEC §16).
    app.state.pages.env.globals["allow_similar"] = partial(similar.card_form, platform)
    # A row claiming an approval no valid signature covers never reads "approved by NAME"
    # (SPEC §20): every list and page asks this of the job it shows.
    app.state.pages.env.globals["unsigned_approval"] = partial(unsigned_approval, platform)
    app.state.pages.env.globals["UNSIGNED_APPROVAL"] = claims.UNSIGNED_APPROVAL
    # Logins are counted per name and address; passwords typed to approve or change something
    # per session (`dashboard.stepup`), so failed logins for a name never lock its operator
    # out of the session she is in.
    app.state.login_limiter = auth.LoginLimiter()


def _start(
    name: str,
    target: Callable[[Platform, threading.Event], None],
    platform: Platform,
    stop: threading.Event,
) -> threading.Thread:
    thread = threading.Thread(target=target, args=(platform, stop), name=name, daemon=True)
    thread.start()
    return thread


def _housekeeping_loop(worker: Worker | None) -> Callable[[Platform, threading.Event], None]:
    """Say "a dashboard is here" (and "a worker is here" for `worker`) every `heartbeat_s`,
    and do the shared background duties when each falls due."""

    def run(platform: Platform, stop: threading.Event) -> None:
        Housekeeper(
            platform=platform,
            settings=platform.settings,
            process_id=platform.process_id,
            role="dashboard",
            also_beats_for=[(worker.worker_id, "worker")] if worker is not None else [],
        ).run_forever(stop)

    return run


def _worker_loop(worker: Worker) -> Callable[[Platform, threading.Event], None]:
    def run(_platform: Platform, stop: threading.Event) -> None:
        worker.run_forever(stop)

    return run


def _mcp_parts(
    platform: Platform,
) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[None]]]:
    return create_mcp_app(platform)
