"""One connection to an upstream MCP server (SPEC §22), with the official SDK's client.

A stdio server's process starts as a tool's call does, from aat's spawner (confined: its own
namespaces, only what its `server.yaml` declares, its limits), with its stdin a pipe that
stays open; the SDK's `Client` talks to it over that pipe and its stdout (`_pipes`), and
negotiates the protocol era (`initialize` or `server/discover`) as it does with any server.
A streamable HTTP server is reached at its `url` with its bearer secret. The connection is
held by one task on the pool's event loop (`hold`) from its start to its stop. A server that
says its tool list changed (`notifications/tools/list_changed` in the handshake era, a
`subscriptions/listen` event in the 2026-07-28 one) is listed again at once, and the link's
`on_listed` told.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.client.session import IncomingMessage
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from webplatform.process import confine, spawner
from webplatform.process.launch import BASE_PATH, _user_home
from webplatform.registry.model import ServerSpec, ToolSpec
from webplatform.registry.servers import with_workspace

# What a server may print on stderr that is kept (its tail), for a start that fails.
_STDERR_TAIL = 4000
# How long a stopping server has to exit once its stdin is closed, before it is killed.
_GRACE_S = 2.0


@dataclass(frozen=True)
class Launch:
    """What starts one server for one workspace: its spec (as tool `tool`), the workspace,
    the values of its secrets, and the fence its process is confined by."""

    tool: ToolSpec
    workspace: Path | None
    secrets: dict[str, str]
    fence: confine.Fence
    caller_cwd: Path | None = None

    @property
    def server(self) -> ServerSpec:
        assert self.tool.server is not None
        return self.tool.server


@dataclass
class Link:
    """A live connection: its client once connected, the tools it listed, and what ends it."""

    launch: Launch
    client: Client | None = None
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    stderr: bytearray = field(default_factory=bytearray)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    crashed: bool = False
    pid: int | None = None
    proc: spawner.SpawnedProcess | None = None
    last_used: float = field(default_factory=time.monotonic)
    in_flight: int = 0
    # Set when the server says its tool list changed; the holder lists it again.
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    # Told, on the pool's loop, each time the tools were listed again after a change.
    on_listed: Callable[[Link], None] | None = None


async def hold(link: Link, ready: asyncio.Future[None]) -> None:
    """Connect, list the server's tools, tell `ready`, and keep the connection until
    `link.closing` is set (a stop, or the server's process ending), listing the tools again
    whenever the server says they changed."""

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            link.changed.set()

    try:
        async with AsyncExitStack() as stack:
            transport = await _transport(link, stack)
            client = Client(transport, raise_exceptions=False, message_handler=on_message)
            await stack.enter_async_context(client)
            link.tools = await _list_tools(client)
            link.client = client
            ready.set_result(None)
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_listen, link, client)
                tasks.start_soon(_relist, link, client)
                await link.closing.wait()
                tasks.cancel_scope.cancel()
    except BaseException as exc:  # noqa: BLE001 - every way a start fails is told to `ready`
        if not ready.done():
            ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
    finally:
        link.client = None
        link.ended.set()


async def _listen(link: Link, client: Client) -> None:
    """In the 2026-07-28 era, a server's tool list changes reach a `subscriptions/listen`
    stream only: open one (a server that serves none, or an older era, is left alone)."""
    try:
        async with client.listen(tools_list_changed=True) as events:
            async for _event in events:
                link.changed.set()
    except ListenNotSupportedError:  # the handshake era: its notifications come instead
        return
    except Exception:  # noqa: BLE001 - a server without listen, or a lost stream: its
        return  # tools stay as last listed (a restart lists them again)


async def _relist(link: Link, client: Client) -> None:
    """List the tools again each time the server says they changed, and tell `on_listed`."""
    while True:
        await link.changed.wait()
        link.changed.clear()
        try:
            link.tools = await _list_tools(client)
        except Exception:  # noqa: BLE001 - a link that cannot list is ended: the next call
            link.closing.set()  # starts the server again and lists it afresh
            return
        if link.on_listed is not None:
            link.on_listed(link)


def failure(link: Link, exc: BaseException) -> str:
    """Why `link`'s server did not start, in one line: what the exec said, else the tail
    of what it printed on stderr, else the client's own words."""
    proc = link.proc
    if proc is not None and proc.has_exited() and proc.exec_error:
        return f"could not run {link.launch.server.command[0]}: {proc.exec_error}"
    said = bytes(link.stderr).decode("utf-8", "replace").strip().splitlines()
    if said:
        return f"it exited saying: {said[-1][:300]}"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(str(e) or type(e).__name__ for e in exc.exceptions)
    return str(exc).strip() or type(exc).__name__


async def _list_tools(client: Client) -> dict[str, dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever is not listed forever
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            tools[tool.name] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def _transport(link: Link, stack: AsyncExitStack) -> Any:
    server = link.launch.server
    if server.url is not None:
        token = link.launch.secrets.get(server.bearer_secret or "")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(server.url, http_client=http)
    return _pipes(link)


def _environment(launch: Launch, jail: confine.Jail) -> dict[str, str]:
    """A stdio server's whole environment: a fixed base, its `env` (with `$WORKSPACE`) and
    its declared secrets; nothing of aat's own environment."""
    server = launch.server
    base = {
        "PATH": os.pathsep.join(BASE_PATH),
        "HOME": _user_home(),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
    }
    fixed = {k: with_workspace(v, launch.workspace) for k, v in server.env}
    return {**launch.secrets, **fixed, **base, **jail.env}


def _argv(launch: Launch) -> list[str]:
    return [with_workspace(part, launch.workspace) for part in launch.server.command]


@asynccontextmanager
async def _pipes(link: Link) -> AsyncIterator[TransportStreams]:
    """Start the server's process confined, and carry messages over its stdin and stdout."""
    launch = link.launch
    with confine.lock(launch.tool, launch.fence, launch.caller_cwd) as jail:
        proc, stdin = _spawn(launch, jail)
        async with _carried(link, proc, stdin) as streams:
            yield streams


@asynccontextmanager
async def _carried(
    link: Link, proc: spawner.SpawnedProcess, stdin: int
) -> AsyncIterator[TransportStreams]:
    """Messages over the started process's stdin and stdout; its stderr's tail kept."""
    link.pid, link.proc = proc.pid, proc
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), proc.stdout)
    errors = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(errors), proc.stderr)
    pipe = os.fdopen(stdin, "wb", buffering=0)
    w_transport, w_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    writer = asyncio.StreamWriter(w_transport, w_protocol, None, loop)
    inbound_w, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outbound, outbound_r = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        async with inbound_w:
            while line := await reader.readline():
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    await inbound_w.send(_parsed(line))
        link.crashed = not link.closing.is_set()
        link.closing.set()  # the process ended (or closed its stdout): the link is gone

    async def read_stderr() -> None:
        while chunk := await errors.read(4096):
            link.stderr += chunk
            del link.stderr[:-_STDERR_TAIL]

    async def write_stdin() -> None:
        async with outbound_r:
            async for message in outbound_r:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                writer.write(data.encode("utf-8") + b"\n")
                await writer.drain()

    tasks = [loop.create_task(t()) for t in (read_stdout, read_stderr, write_stdin)]
    try:
        yield inbound, outbound
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(proc, writer, tasks)


def _parsed(line: bytes) -> SessionMessage | Exception:
    """One line of the server's stdout as a message, or the error saying it is not one."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


def _spawn(launch: Launch, jail: confine.Jail) -> tuple[spawner.SpawnedProcess, int]:
    """The server's process, from the spawner, confined by `jail`; and our end of its stdin."""
    if jail.paths is None or not spawner.supported():
        raise confine.NotStarted(
            "a stdio server runs only confined by namespaces or Landlock, which this system "
            "does not give it"
        )
    theirs, ours = os.pipe()
    try:
        request = spawner.Request(
            _argv(launch),
            _environment(launch, jail),
            launch.server.folder,
            jail.request(),
            jail.view(),
            30.0,
            stdin=theirs,
        )
        proc = spawner.spawn(request)
    except BaseException:
        os.close(ours)
        raise
    finally:
        os.close(theirs)
    if proc.exec_error is not None:
        os.close(ours)
        raise confine.NotStarted(f"could not start {launch.server.command[0]}: {proc.exec_error}")
    return proc, ours


async def _stop(
    proc: spawner.SpawnedProcess, writer: asyncio.StreamWriter, tasks: list[asyncio.Task[None]]
) -> None:
    """Close the server's stdin, give it `_GRACE_S` to exit, then end its whole group."""
    with contextlib.suppress(OSError, RuntimeError):
        writer.close()
    deadline = time.monotonic() + _GRACE_S
    while not proc.has_exited() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    if not proc.has_exited():
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.to_thread(proc.wait, _GRACE_S * 5)
    for task in tasks:
        task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.gather(*tasks, return_exceptions=True)
    for stream in (proc.stdout, proc.stderr):
        with contextlib.suppress(OSError, AttributeError):
            stream.close()  # type: ignore[union-attr]
