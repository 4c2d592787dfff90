"""The chat surface: one MCP tool per declared registry action, on its own `MCPServer`.

Tool definitions come from `chat_surface.yaml` alone (names, wording, pinned schemas), so a
manifest edit cannot reshape what clients cached; annotations come from the gate. Each call
re-checks its action against the live registry and runs it through `services.request_run`
like every other surface. This module never imports the generic surface (`webplatform.mcp.
server`), nor it this one: what they share is in `webplatform.mcp.protocol`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult

from webplatform.jobs.answers import Answer, Status, answered
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.mcp import protocol, tracing, waiting
from webplatform.mcp.results import answer_result
from webplatform.platform import Platform
from webplatform.registry.model import Registry
from webplatform.store.models import Surface
from webplatform.surface import (
    Declaration,
    NameTable,
    Problem,
    PublishedTool,
    find_declaration,
    load_and_check,
    tool_problems,
)
from webplatform.trust import gate

SURFACE_VERSION_META_KEY = "aat/surfaceVersion"
DEFAULT_INSTRUCTIONS = (
    "Each tool runs one local operation and answers with a JSON object whose status says what "
    "happened (succeeded, failed, invalid, ...). Copy argument names exactly as the schema "
    "spells them."
)

# What a published tool does when called; the tools list never depends on it.
CallFn = Callable[[PublishedTool, Context], Awaitable[CallToolResult]]


class ChatSurfaceError(Exception):
    """The chat surface cannot be served: no declaration, or it disagrees with the registry."""

    def __init__(self, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []

    def __str__(self) -> str:
        lines = [self.args[0], *(f"  {p}" for p in self.problems)]
        return "\n".join(lines)


def load_surface(roots: list[Path], registry: Registry) -> Declaration:
    """The declaration beside the registry, checked; ChatSurfaceError when it cannot be served."""
    path = find_declaration(roots)
    if path is None:
        where = ", ".join(str(r) for r in roots)
        raise ChatSurfaceError(f"no chat_surface.yaml in the registry root(s) {where}: add one")
    declaration, problems = load_and_check(path, registry)
    if declaration is None or problems:
        raise ChatSurfaceError(
            f"{path} disagrees with the registry; fix it (`aat check` lists the same)", problems
        )
    return declaration


def chat_server(declaration: Declaration, registry: Registry, call: CallFn) -> MCPServer:
    """The chat `MCPServer` for a checked declaration: its identity and only the declared tools."""
    table = NameTable(declaration.tools)
    tools = [_tool(published, table, registry, call) for published in declaration.tools]
    identity = declaration.server
    server: MCPServer[Any] = MCPServer(
        identity.name,
        title=identity.title,
        description=identity.description,
        instructions=identity.instructions or DEFAULT_INSTRUCTIONS,
        website_url=identity.website_url,
        version=declaration.surface_version,
        tools=tools,
    )
    names = tuple(table.names)
    server.middleware.append(
        protocol.surface_middleware(
            server,
            tool_names=lambda: names,
            meta={SURFACE_VERSION_META_KEY: declaration.surface_version},
        )
    )
    return server


def _tool(published: PublishedTool, table: NameTable, registry: Registry, call: CallFn) -> Tool:
    key = published.key
    spec = registry.runnable(key.kind, key.name)
    action = spec.action(key.action) if spec else None
    assert spec is not None and action is not None  # load_surface checked the declaration
    badge = gate.describe(spec.name, action)
    assert badge != "irreversible", f"{key} is irreversible and cannot be published"

    async def run(ctx: Context) -> CallToolResult:
        return await call(published, ctx)

    tool = Tool.from_function(
        run,
        name=table.name(key),
        title=published.title,
        description=published.description,
        annotations=protocol.annotations_for(badge),
        structured_output=False,
    )
    # The function reads its raw arguments itself (a wrong type is answered, not rejected by
    # the SDK); the schema clients see is the pinned one.
    tool.parameters = published.input_schema()
    return tool


class ChatBridge:
    """Runs published tools for one process and transport."""

    def __init__(self, platform: Platform, surface: Surface) -> None:
        self.platform = platform
        self.surface = surface

    async def call(self, published: PublishedTool, ctx: Context) -> CallToolResult:
        """Re-check the action against the live registry, then run it like any other call."""
        key, max_bytes = published.key, self.platform.settings.result_max_bytes
        registry = await anyio.to_thread.run_sync(self.platform.registry)
        drift = tool_problems(published, registry)
        if drift:
            return answer_result(
                Answer(
                    Status.refused,
                    tool=key.name,
                    action=key.action,
                    error=f"this published tool no longer matches the registry ({drift[0][1]}); "
                    "the operator must update chat_surface.yaml (see `aat check`)",
                ),
                max_bytes=max_bytes,
            )
        actor = protocol.request_actor(ctx, self.surface)
        args = protocol.raw_arguments(ctx, declared=[a.name for a in published.args])
        progress = protocol.progress_sender(ctx)
        answer = await waiting.in_thread(
            lambda: answered(
                request_run,
                platform=self.platform,
                call=RunCall(kind=key.kind, name=key.name, action=key.action, args=args),
                actor=actor,
                consent=Consent.NONE,
            ),
            progress=progress,
            what=f"running {key.name} {key.action}",
            relay=progress.upstream,
        )
        spec = registry.runnable(key.kind, key.name)
        action = spec.action(key.action) if spec else None
        return answer_result(answer, max_bytes=max_bytes, action=action)


def build_chat_server(platform: Platform, *, surface: Surface) -> MCPServer:
    """The chat MCP server for `platform`; ChatSurfaceError when it cannot be served."""
    registry = platform.registry()
    declaration = load_surface(platform.settings.registry_roots, registry)
    server = chat_server(declaration, registry, ChatBridge(platform, surface).call)
    tracing.install(server, surface)
    return server
