"""`aat mcp`: the bridge on stdin/stdout, where stdout carries JSON-RPC and nothing else."""

from __future__ import annotations

import contextlib
import gc
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import ValidationError

from webplatform.config import Settings
from webplatform.mcp.logs import configure_stderr_logging
from webplatform.mcp.server import build_server
from webplatform.platform import Platform
from webplatform.store.models import Surface


async def serve_stdio(platform: Platform, *, surface: str = "generic") -> None:
    """Serve one MCP client on this process's stdin/stdout until it hangs up.

    `surface` is `generic` (the seven tools) or `chat` (the declared chat surface).
    """
    if surface == "chat":
        from webplatform.mcp.chat import build_chat_server  # the generic surface does without it

        server = build_chat_server(platform, surface=Surface.mcp_stdio)
    else:
        server = build_server(platform, surface=Surface.mcp_stdio)
    settle_heap()
    await _serve_stdio_answering_garbage(server, drain_s=drain_time(platform.settings))


def settle_heap() -> None:
    """Move everything made so far (modules, the SDK's models, the server) out of the cyclic
    collector's sight and turn it on (`aat` turns it off while `aat mcp` imports).

    Those objects live as long as the process: walking them on every full collection would
    cost a pause of about 0.1 s now and then, for nothing.
    """
    gc.freeze()
    gc.enable()


async def serve_stdio_streams(
    server: MCPServer, *, stdin: Any, stdout: Any, drain_s: float
) -> None:
    """Serve one MCP session with the SDK's stdio transport over the given line files.

    They need what `stdio_server` uses of `anyio.AsyncFile[str]`: async iteration over lines,
    `write` and `flush`. After the client's end of input, requests already read are answered
    for up to `drain_s` before the session ends.
    """
    await _serve_stdio_answering_garbage(server, stdin=stdin, stdout=stdout, drain_s=drain_s)


def drain_time(settings: Settings) -> float:
    """How long requests read before the client closed its input may still take to answer:
    a held call waits for the operator at most the approval wait, then answers."""
    return settings.approval_wait_s + 10.0


class _InFlight:
    """The client's requests not answered yet, so the end of its input can wait for them."""

    def __init__(self) -> None:
        self._ids: set[str | int] = set()
        self._idle = anyio.Event()
        self._idle.set()

    def asked(self, message: Any) -> None:
        if isinstance(message, JSONRPCRequest):
            self._ids.add(message.id)
            self._idle = anyio.Event() if self._idle.is_set() else self._idle

    def answered(self, message: Any) -> None:
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self._ids.discard(message.id)
            if not self._ids:
                self._idle.set()

    async def drained(self) -> None:
        await self._idle.wait()


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
    server: MCPServer, *, stdin: Any = None, stdout: Any = None, drain_s: float
) -> None:
    """`server.run_stdio_async()`, except that a line that cannot be read gets an error answer,
    and the end of the client's input ends the session only once every request read before it
    is answered (`printf '...' | aat mcp` gets all its answers), or after `drain_s`.

    The SDK points fd 1 at stderr while it serves, so a stray print() or a child process
    that inherits stdout cannot corrupt the protocol stream. `stdin`/`stdout` replace the
    process's own (line files as `stdio_server` takes them: the local socket's session).
    """
    lowlevel = server._lowlevel_server  # MCPServer runs stdio only through it, too
    inflight = _InFlight()
    async with stdio_server(stdin, stdout) as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        out_send, out_receive = anyio.create_memory_object_stream[SessionMessage](0)

        async def sift() -> None:
            async with send, read_stream:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(SessionMessage(unreadable_answer(item)))
                    else:
                        inflight.asked(item.message)
                        await send.send(item)
                with anyio.move_on_after(drain_s):
                    await inflight.drained()

        async def write_out() -> None:
            # The stdio transport's writer ends when this stream closes, as the SDK's server
            # would close it: after the last answer.
            async with out_receive, write_stream:
                async for message in out_receive:
                    await write_stream.send(message)
                    inflight.answered(message.message)

        async with receive, anyio.create_task_group() as tg:
            tg.start_soon(sift)
            async with anyio.create_task_group() as writing:
                writing.start_soon(write_out)
                async with out_send:
                    await lowlevel.run(receive, out_send, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()


def run_stdio(settings: Settings, *, surface: str = "generic") -> None:
    """Run the stdio bridge (blocking); used by `aat mcp`. Logs go to stderr.

    Exits with status 1 and the reason on stderr when the chat surface cannot be served.
    """
    configure_stderr_logging()
    platform = Platform(settings)
    if surface == "chat":
        _run_chat(platform)
        return
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(lambda: serve_stdio(platform))


def _run_chat(platform: Platform) -> None:
    from webplatform.mcp.chat import (
        ChatSurfaceError,  # imported here: the generic surface does without it
    )

    try:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(lambda: serve_stdio(platform, surface="chat"))
    except ChatSurfaceError as exc:
        sys.stderr.write(f"aat mcp --surface chat: {exc}\n")
        raise SystemExit(1) from None
