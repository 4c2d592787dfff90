"""`aat mcp`: the bridge on stdin/stdout, where stdout carries JSON-RPC and nothing else."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store.models import Surface

from .chat import ChatSurfaceError, build_chat_server
from .logs import configure_stderr_logging
from .server import build_server


async def serve_stdio(platform: Platform, *, surface: str = "generic") -> None:
    """Serve one MCP client on this process's stdin/stdout until it hangs up.

    `surface` is `generic` (the seven tools) or `chat` (the declared chat surface).
    """
    if surface == "chat":
        server = build_chat_server(platform, surface=Surface.mcp_stdio)
    else:
        server = build_server(platform, surface=Surface.mcp_stdio)
    await _serve_stdio_answering_garbage(server)


async def serve_stdio_streams(server: MCPServer, *, stdin: Any, stdout: Any) -> None:
    """Serve one MCP session with the SDK's stdio transport over the given line files.

    They need what `stdio_server` uses of `anyio.AsyncFile[str]`: async iteration over lines,
    `write` and `flush`.
    """
    await _serve_stdio_answering_garbage(server, stdin=stdin, stdout=stdout)


def unreadable_answer(exc: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line that is not a message: its id cannot be read, so null.

    JSON-RPC 2.0 answers a parse error (-32700) or an invalid request (-32600) that way; the
    SDK's stdio transport would drop the line silently, leaving the client waiting forever.
    """
    problems = exc.errors() if isinstance(exc, ValidationError) else []
    unparsable = any(p.get("type") == "json_invalid" for p in problems)
    detail = str(problems[0].get("msg", "")) if problems else type(exc).__name__
    if "recursion limit" in detail:
        message = "Parse error: the request is nested too deeply to read; send flatter JSON"
    elif unparsable:
        message = f"Parse error: {detail[:200]}; send one JSON-RPC message per line"
    else:
        message = "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
    code = PARSE_ERROR if unparsable else INVALID_REQUEST
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))


async def _serve_stdio_answering_garbage(
    server: MCPServer, *, stdin: Any = None, stdout: Any = None
) -> None:
    """`server.run_stdio_async()`, except that a line that cannot be read gets an error answer.

    The SDK points fd 1 at stderr while it serves, so a stray print() or a child process
    that inherits stdout cannot corrupt the protocol stream. `stdin`/`stdout` replace the
    process's own (line files as `stdio_server` takes them: the local socket's session).
    """
    lowlevel = server._lowlevel_server  # MCPServer runs stdio only through it, too
    async with stdio_server(stdin, stdout) as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def sift() -> None:
            async with send, read_stream:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(SessionMessage(unreadable_answer(item)))
                    else:
                        await send.send(item)

        async with receive, anyio.create_task_group() as tg:
            tg.start_soon(sift)
            await lowlevel.run(receive, write_stream, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()


def run_stdio(settings: Settings, *, surface: str = "generic") -> None:
    """Run the stdio bridge (blocking); used by `aat mcp`. Logs go to stderr.

    Exits with status 1 and the reason on stderr when the chat surface cannot be served.
    """
    configure_stderr_logging()
    platform = Platform(settings)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(lambda: serve_stdio(platform, surface=surface))
    except ChatSurfaceError as exc:
        sys.stderr.write(f"aat mcp --surface chat: {exc}\n")
        raise SystemExit(1) from None
