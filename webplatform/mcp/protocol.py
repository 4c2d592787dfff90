"""Protocol handling both MCP surfaces share: request details, progress, annotations, digest.

The generic surface (`server.py`) and the chat surface (`chat/`) both build on this module and
never on each other (an import-linter contract): what one learns about the SDK's wire format,
the other gets for free.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ListToolsResult, ToolAnnotations
from mcp_types import methods as wire_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from webplatform.canonical import canonical_json, sha256_hex
from webplatform.jobs.answers import Answer, Status
from webplatform.mcp.results import answer_result
from webplatform.platform import Actor
from webplatform.store.models import Surface
from webplatform.suggest import did_you_mean

logger = logging.getLogger(__name__)

# `server/discover` result `_meta` key: sha256 (hex) over the canonical JSON of the `tools`
# array exactly as `tools/list` returns it, so a client or gateway can check its copy.
TOOLS_DIGEST_META_KEY: Final = "aat/toolsDigest"
# The ASGI scope key under which the `/mcp` gate (`http.BearerGate`) names the agent whose
# token a request carried.
AGENT_SCOPE_KEY: Final = "aat.agent"

READ_ONLY: Final = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# Reversible runs may still create things, so they are neither read-only nor idempotent.
REVERSIBLE_RUN: Final = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
IRREVERSIBLE_RUN: Final = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
)


@dataclass(frozen=True)
class LocalPeer:
    """The `aat mcp` whose session `aat serve` serves on its local socket (`mcp.local`).

    `cwd` is where that `aat mcp` runs (its client's project), `address` names the OS user
    the kernel vouches for (`SO_PEERCRED`), e.g. `unix:alice`.
    """

    cwd: Path
    address: str


# Set around a session served on the local socket; unset in an in-process `aat mcp`.
LOCAL_PEER: contextvars.ContextVar[LocalPeer | None] = contextvars.ContextVar(
    "aat_local_peer", default=None
)


def annotations_for(badge: Literal["read-only", "reversible", "irreversible"]) -> ToolAnnotations:
    """The MCP annotations for a gate badge (`gate.describe`); hints only, enforcement is code."""
    chosen = {"read-only": READ_ONLY, "reversible": REVERSIBLE_RUN}.get(badge, IRREVERSIBLE_RUN)
    # read-only implies reversible: a hint that says both would contradict the gate.
    assert not (chosen.read_only_hint and chosen.destructive_hint)
    return chosen


def client_name(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The MCP client's self-declared name (`clientInfo.name`), in either protocol era."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None and params.client_info else None


def agent_name(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The agent whose token the HTTP request carried (set by the `/mcp` gate), or None."""
    scope = getattr(ctx.request, "scope", None)
    agent = scope.get(AGENT_SCOPE_KEY) if isinstance(scope, dict) else None
    return agent if isinstance(agent, str) else None


def client_address(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The peer address of an HTTP request, or None (stdio, in-memory)."""
    client = getattr(ctx.request, "client", None)
    host = getattr(client, "host", None)
    return host if isinstance(host, str) else None


def request_actor(ctx: Context, surface: Surface) -> Actor:
    """Who asks for a run in this tool call: client name, agent token, address.

    A stdio bridge runs where its client started it (the agent's project), so relative paths
    an agent passes resolve there (`cwd`); over HTTP there is no such place. A session handed
    to `aat serve` by a relaying `aat mcp` takes that process's folder, and its OS user as
    the address.
    """
    rc = ctx.request_context
    peer = LOCAL_PEER.get()
    cwd = None
    if surface is Surface.mcp_stdio:
        cwd = peer.cwd if peer is not None else Path.cwd()
    return Actor(
        surface=surface,
        client=client_name(rc),
        agent=agent_name(rc),
        address=client_address(rc) or (peer.address if peer is not None else None),
        cwd=cwd,
    )


# Arguments some clients add to every tool's schema on their own and may send: Gemini CLI's
# `wait_for_previous` (it orders the client's own parallel calls). They mean nothing to aat,
# so they are dropped, not refused, unless the tool itself declares one of these names.
CLIENT_ADDED_ARGUMENTS: Final = frozenset({"wait_for_previous"})


def without_client_added(arguments: Mapping[str, Any], declared: Collection[str]) -> dict[str, Any]:
    """`arguments` less the ones clients add on their own (`CLIENT_ADDED_ARGUMENTS`) that
    the tool does not itself declare."""
    return {k: v for k, v in arguments.items() if k not in CLIENT_ADDED_ARGUMENTS or k in declared}


def raw_arguments(ctx: Context, *, declared: Collection[str] = ()) -> dict[str, Any]:
    """The call's `arguments` as sent (the tool functions validate them themselves), less
    the ones clients add on their own that are not `declared`."""
    params = ctx.request_context.params or {}
    arguments = params.get("arguments")
    if not isinstance(arguments, dict):
        return {}
    return without_client_added(arguments, declared)


def progress_sender(ctx: Context) -> CallProgress:
    """Progress notifications for this call; a closed stream never ends the wait."""
    return CallProgress(ctx)


class CallProgress:
    """One call's progress notifications: aat's own while it runs or waits (called as a
    `waiting.Progress`), and an upstream server's passed on (`upstream`).

    aat's own value is the time since the call began, whichever wait reports it (running,
    waiting for the decision, then for the run), so it only ever grows, as MCP requires, and a
    client showing it never sees it start over; the wait's own figures stay in the message.
    An upstream server's progress is passed on with its own value, total and message, shifted
    past what aat sent before the first of them; from then on it is the call's clock, and
    aat's own notes only nudge the value (the client's timeout still resets). A value that
    does not grow is dropped: the server is not trusted to keep MCP's rule.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._began = time.monotonic()
        self._last = 0.0
        self._total: float | None = None
        self._base: float | None = None

    async def __call__(self, elapsed: float, total: float | None, message: str) -> None:
        """aat's own note (`waiting.Progress`): running, or waiting for a decision."""
        del elapsed, total  # the wait's own clock; the call's is what the client shows
        if self._base is None:
            value = max(round(time.monotonic() - self._began, 1), self._last + 0.1)
        else:
            value = self._last + 0.001
        await self._send(value, self._total, message)

    async def upstream(self, progress: float, total: float | None, message: str | None) -> None:
        """An upstream server's progress for this call, passed on."""
        if self._base is None:
            self._base = self._last
        value = self._base + progress
        if value <= self._last:
            return
        self._total = self._base + total if total is not None else None
        await self._send(value, self._total, message)

    async def _send(self, value: float, total: float | None, message: str | None) -> None:
        self._last = value
        try:
            await self._ctx.report_progress(value, total, message)
        except Exception:  # progress is a courtesy; a closed stream must not end the wait
            logger.debug("could not send progress", exc_info=True)


def tools_digest(tools: list[dict[str, Any]]) -> str:
    """sha256 (hex) over the canonical JSON of a `tools` array as sent on the wire."""
    return sha256_hex(canonical_json(tools))


async def wire_tools(server: MCPServer, version: str) -> list[dict[str, Any]]:
    """`tools/list`'s `tools` array exactly as protocol `version` sends it."""
    listed = ListToolsResult(tools=await server.list_tools())
    wire = wire_methods.serialize_server_result(
        "tools/list", version, listed.model_dump(by_alias=True, mode="json", exclude_none=True)
    )
    tools: list[dict[str, Any]] = wire["tools"]
    return tools


async def wire_tools_digest(server: MCPServer, version: str) -> str:
    """The tools digest for `version`: over `tools/list`'s `tools` exactly as that era sends it."""
    return tools_digest(await wire_tools(server, version))


def wire_result(version: str, result: CallToolResult) -> dict[str, Any]:
    """A tool result dumped as the middleware must return it for protocol `version`."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if version in MODERN_PROTOCOL_VERSIONS:
        dumped["resultType"] = "complete"
    return dumped


def unknown_tool_result(version: str, name: str, known: Sequence[str]) -> dict[str, Any]:
    """An `invalid` tool result (not a protocol error) for a tool name this server lacks."""
    answer = Answer(
        Status.invalid,
        error=f"no MCP tool {name[:100]!r}; tools: {', '.join(known)}",
        did_you_mean=did_you_mean(name[:200], known),
    )
    return wire_result(version, answer_result(answer, max_bytes=20_000))


def surface_middleware(
    server: MCPServer, *, tool_names: Callable[[], Sequence[str]], meta: dict[str, Any]
) -> Callable[..., Any]:
    """Middleware both surfaces install: unknown tools answered as results; discover `_meta`.

    `server/discover`'s `_meta` gets the tools digest for the negotiated era, plus `meta`.
    """

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params or {}
        if ctx.method == "tools/call":
            name, known = params.get("name"), tool_names()
            if isinstance(name, str) and name not in known:
                return unknown_tool_result(ctx.protocol_version, name, known)
        result = await call_next(ctx)
        if ctx.method == "server/discover" and isinstance(result, dict):
            extra = dict(result.get("_meta") or {})
            extra.update(meta)
            extra[TOOLS_DIGEST_META_KEY] = await wire_tools_digest(server, ctx.protocol_version)
            result = {**result, "_meta": extra}
        return result

    return middleware
