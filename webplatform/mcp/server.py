"""The MCP bridge: seven tools on `MCPServer`, every run through `webplatform.jobs.services`.

Protocol handling (eras, transports, JSON-RPC) is the SDK's; this module only maps MCP calls
onto the platform and the platform's answers back onto MCP results. A tool problem (unknown
tool, bad arguments, refusal, failed run) is always a result with `isError` and a JSON body,
never a protocol error.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import FunctionResource
from mcp.server.mcpserver.tools import Tool
from mcp_types import (
    EmptyResult,
    SubscribeRequestParams,
    ToolAnnotations,
    UnsubscribeRequestParams,
)

import webplatform
from webplatform.mcp import naming, protocol, sealing, server_changes, tracing
from webplatform.mcp.approvals import ApprovalWatcher, pending_body
from webplatform.mcp.arguments import ArgumentsTool
from webplatform.mcp.bridge import Bridge, ToolFn
from webplatform.mcp.protocol import (
    client_name,
    tools_digest,
    wire_tools_digest,
)
from webplatform.mcp.tasks import TasksExtension
from webplatform.platform import Platform
from webplatform.store.models import Surface

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "aat runs local command-line tools for you. Start with capabilities {} and narrow down; "
    "copy argument names exactly. Reversible actions run with run_tool; irreversible ones need "
    "run_tool_confirmed and a human operator's approval in the dashboard: when a call answers "
    "pending_approval, tell the user and poll job_status with the job id."
)

ANNOTATIONS: dict[str, ToolAnnotations] = {
    naming.CAPABILITIES: protocol.READ_ONLY,
    naming.GET_SKILL: protocol.READ_ONLY,
    naming.JOB_STATUS: protocol.READ_ONLY,
    naming.RUN_TOOL: protocol.REVERSIBLE_RUN,
    naming.RUN_AGENT: protocol.REVERSIBLE_RUN,
    naming.RUN_TOOL_CONFIRMED: protocol.IRREVERSIBLE_RUN,
    naming.RUN_AGENT_CONFIRMED: protocol.IRREVERSIBLE_RUN,
}

# The client (and agent token) the current request came from, for the approvals resource
# (its read function takes no context; the middleware sets this around `resources/read`).
_current_client: contextvars.ContextVar[tuple[str | None, str | None]] = contextvars.ContextVar(
    "aat_mcp_client", default=(None, None)
)


def _middleware() -> Callable[..., Any]:
    """Sets the requesting client around `resources/read` (the approvals resource reads it)."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "resources/read":
            return await call_next(ctx)
        token = _current_client.set((client_name(ctx), protocol.agent_name(ctx)))
        try:
            return await call_next(ctx)
        finally:
            _current_client.reset(token)

    return middleware


def _tools(bridge: Bridge) -> list[Tool]:
    """The seven tools, each validating its arguments against its model (`arguments`)."""
    functions: dict[str, ToolFn] = {
        naming.CAPABILITIES: bridge.capabilities,
        naming.RUN_TOOL: bridge.run,
        naming.RUN_AGENT: bridge.run,
        naming.RUN_TOOL_CONFIRMED: bridge.run_confirmed,
        naming.RUN_AGENT_CONFIRMED: bridge.run_confirmed,
        naming.GET_SKILL: bridge.get_skill,
        naming.JOB_STATUS: bridge.job_status,
    }
    return [
        ArgumentsTool.of(
            functions[name],
            name=name,
            # Also in the annotations: Claude Code shows only `annotations.title`.
            annotations=ANNOTATIONS[name].model_copy(update={"title": naming.TITLES[name]}),
            refuse=bridge.refused,
        )
        for name in naming.TOOL_NAMES
    ]


def build_server(platform: Platform, *, surface: Surface) -> MCPServer:
    """The MCP server for `platform`, its jobs recorded as coming from `surface`."""
    watcher = ApprovalWatcher(platform, surface)
    bridge = Bridge(platform, surface, watcher)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        async with watcher.running(), server_changes.told(platform, watcher.bus):
            yield {}

    key = sealing.state_key(platform.settings.home)
    tasks = TasksExtension(
        platform=platform,
        surface=surface,
        codec=sealing.task_id_codec(key),
        render=bridge.result_for,
    )
    server: MCPServer[Any] = MCPServer(
        "aat",
        version=webplatform.__version__,
        instructions=INSTRUCTIONS,
        tools=_tools(bridge),
        subscriptions=watcher.bus,
        lifespan=lifespan,
        extensions=[tasks],
        request_state_security=sealing.request_state_security(key),
    )
    # Outside the SDK's request-state boundary, so its refusals can be explained.
    server.middleware.insert(0, sealing.explain_rejected_state())
    server.middleware.append(
        protocol.surface_middleware(server, tool_names=lambda: naming.TOOL_NAMES, meta={})
    )
    server.middleware.append(_middleware())
    tracing.install(server, surface)

    server.add_resource(_pending_approvals(platform, surface))
    _serve_legacy_subscriptions(server, watcher)
    return server


def _pending_approvals(platform: Platform, surface: Surface) -> FunctionResource:
    """The resource listing the requesting client's calls waiting for an operator."""

    async def read_pending() -> str:
        client, agent = _current_client.get()
        return await anyio.to_thread.run_sync(
            lambda: pending_body(platform=platform, surface=surface, client=client, agent=agent)
        )

    return FunctionResource(
        uri=naming.PENDING_APPROVALS_URI,
        name="pending-approvals",
        title="Jobs waiting for approval",
        description=(
            "This client's calls waiting for an operator's approval (read-only; subscribe "
            "for a hint when one is decided)."
        ),
        mime_type="application/json",
        fn=read_pending,
    )


def _serve_legacy_subscriptions(server: MCPServer, watcher: ApprovalWatcher) -> None:
    """`resources/subscribe` for handshake-era clients (MCPServer serves only the modern listen)."""

    async def subscribe(
        ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        if str(params.uri) == naming.PENDING_APPROVALS_URI:
            watcher.subscribe_legacy(ctx.session)
        return EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        del params  # one resource: unsubscribing means from it
        watcher.unsubscribe_legacy(ctx.session)
        return EmptyResult()

    # MCPServer has no public hook for these two handshake-era methods; the low-level server
    # it wraps does.
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)


__all__ = ["ANNOTATIONS", "build_server", "client_name", "tools_digest", "wire_tools_digest"]
