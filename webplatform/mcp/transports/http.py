"""The bridge over streamable HTTP, for `aat serve` to mount at `/mcp` (and `/mcp/chat`).

`create_mcp_app(platform)` returns the ASGI app and the lifespan the host app must enter (the
SDK's session manager lives in it). Mount the app with a plain route, e.g.
`app.router.routes.append(Route("/mcp", endpoint=mcp_app))`, so `/mcp` itself answers without a
redirect. Both protocol eras are served on the same path: legacy clients open a session with
`initialize`, modern ones send self-contained requests carrying `MCP-Protocol-Version`.

Host and Origin are checked against DNS rebinding (loopback names on any port, plus
`AAT_ALLOWED_HOSTS`). A bearer token is required once any agent token exists (`aat agent
add`), whenever `AAT_MCP_TOKEN` is set, and always when the server listens beyond loopback;
without one such requests are refused.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from webplatform.config import Settings
from webplatform.mcp.chat import ChatSurfaceError, build_chat_server
from webplatform.mcp.protocol import AGENT_SCOPE_KEY
from webplatform.mcp.server import build_server
from webplatform.mcp.transports.oauth import resource_metadata_url, site_of
from webplatform.mcp.transports.replicas import ReplicaRouter
from webplatform.platform import Platform
from webplatform.store import agents
from webplatform.store.models import AgentTokenPublic, Surface
from webplatform.trust import authority
from webplatform.trust.oauth import same_resource

logger = logging.getLogger(__name__)
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """Host/Origin allow-lists: loopback names with any port, plus `AAT_ALLOWED_HOSTS`."""
    extra = settings.extra_allowed_hosts
    hosts = [*LOOPBACK_NAMES, *(f"{h}:*" for h in LOOPBACK_NAMES), *extra]
    origins = [f"{scheme}://{h}" for scheme in ("http", "https") for h in hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (`127.0.0.1`, `::1`, `[::1]`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerGate:
    """Guards `/mcp` with bearer tokens: agent tokens, and the shared `AAT_MCP_TOKEN`.

    A token is required once any agent token exists (loopback too), when `AAT_MCP_TOKEN` is
    set, and always beyond loopback. A valid agent token names its agent in the scope.
    """

    def __init__(
        self, app: ASGIApp, *, platform: Platform, token: str, require: bool | None
    ) -> None:
        self.app = app
        self.platform = platform
        self.token = token
        self.require = require

    def _needed(self, scope: Scope) -> bool:
        if self.require is not None:
            return self.require or bool(self.token)
        server = scope.get("server")
        bound = str(server[0]) if server else "127.0.0.1"
        return bool(self.token) or not is_loopback(bound)

    def _check(self, given: str) -> tuple[bool, AgentTokenPublic | None]:
        """(agent tokens exist, the agent holding `given` or None), read on every request so
        a revocation takes effect at once; `last_used_at` is written only now and then."""

        # Once a token was minted, deleting every token row does not open /mcp again.
        minted = authority.remembers(self.platform, authority.TOKENS_FILE)
        # Only tokens whose rows aat signed count; any row, signed or not, keeps /mcp closed.
        exist, agent = self.platform.tokens.check(given, minted=minted)
        authority.report_forged(self.platform)
        if agent is not None and agents.is_stale(agent):
            name = agent.name
            self.platform.tokens.touch(name)
        return exist, agent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass authorised requests through; answer the others 401/403."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scheme, _, value = Headers(scope=scope).get("authorization", "").partition(" ")
        given = value.strip() if scheme.lower() == "bearer" else ""
        exist, agent = await anyio.to_thread.run_sync(self._check, given)
        # A signed-in agent's token works only at the `/mcp` it was issued for (RFC 8707).
        site = site_of(scope, self.platform.settings)
        if agent is not None and (
            agent.resource is None or same_resource(agent.resource, site.resource)
        ):
            scope[AGENT_SCOPE_KEY] = agent.name
            await self.app(scope, receive, send)
            return
        shared_ok = bool(self.token) and hmac.compare_digest(given.encode(), self.token.encode())
        if shared_ok or not (exist or self._needed(scope)):
            await self.app(scope, receive, send)
            return
        await self._refuse(scope, receive, send, exist=exist)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, *, exist: bool) -> None:
        if not self.token and not exist:
            response = JSONResponse(
                {
                    "error": "this /mcp listens beyond loopback: mint an agent token "
                    "(`aat agent add NAME`) or set AAT_MCP_TOKEN to use it"
                },
                status_code=403,
            )
            await response(scope, receive, send)
            return
        metadata = resource_metadata_url(scope, self.platform.settings)
        response = JSONResponse(
            {
                "error": "missing, wrong, expired or revoked bearer token: sign in (the client "
                "opens the browser) or send Authorization: Bearer $AAT_AGENT_TOKEN (an agent "
                "token from `aat agent add NAME`)"
            },
            status_code=401,
            # RFC 9728 §5.1: where a client finds how to sign in.
            headers={"WWW-Authenticate": f'Bearer realm="aat", resource_metadata="{metadata}"'},
        )
        await response(scope, receive, send)


def create_mcp_app(
    platform: Platform, *, require_token: bool | None = None
) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[None]]]:
    """The streamable-HTTP MCP app and the lifespan the host app must enter while serving it.

    `require_token=None` (default) requires the bearer token when `AAT_MCP_TOKEN` is set or the
    socket is bound beyond loopback; `True` always requires it; `False` only when one is set.
    """
    server = build_server(platform, surface=Surface.mcp_http)
    return _http_parts(server, platform, require_token=require_token)


def create_chat_mcp_app(
    platform: Platform, *, require_token: bool | None = None
) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[None]]]:
    """The chat surface over streamable HTTP (`/mcp/chat`), guarded exactly like `/mcp`.

    When the chat surface cannot be served (no `chat_surface.yaml`, or it disagrees with the
    registry), the app answers 503 with the reason instead, so `aat serve` still starts.
    """
    try:
        server = build_chat_server(platform, surface=Surface.mcp_http)
    except ChatSurfaceError as exc:
        logger.error("/mcp/chat is off: %s", exc)
        off = JSONResponse({"error": f"the chat surface is off: {exc.args[0]}"}, status_code=503)
        return off, _no_lifespan
    return _http_parts(server, platform, require_token=require_token)


@asynccontextmanager
async def _no_lifespan() -> AsyncIterator[None]:
    yield


def _http_parts(
    server: MCPServer, platform: Platform, *, require_token: bool | None
) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[None]]]:
    # Builds the session manager; its own Starlette wrapper is not used, so the app does not
    # care which path it is mounted on.
    server.streamable_http_app(transport_security=transport_security(platform.settings))
    manager = server.session_manager
    # Any replica serves any legacy session: its owner's, forwarded (`replicas.py`).
    router = ReplicaRouter(
        StreamableHTTPASGIApp(manager),
        home=platform.settings.home,
        address=platform.settings.replica_url,
    )
    app = BearerGate(
        router,
        platform=platform,
        token=platform.settings.mcp_token.get_secret_value(),
        require=require_token,
    )

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with manager.run():
            try:
                yield
            finally:
                await router.aclose()  # the forwarder's connections to other replicas

    return app, lifespan
