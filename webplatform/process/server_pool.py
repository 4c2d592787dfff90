"""Upstream MCP servers' lifecycle and calls (SPEC §22): what `runner.run` does for an action
of a server's tool.

A server is started on first use (per workspace: `$WORKSPACE` is the caller's), kept while
it is used, stopped after `AAT_SERVER_IDLE_S` without a call, and started again on the next
call after a crash, waiting out a backoff that doubles with each crash in a row. Every
connection is held on one event loop, in a thread of its own, so any thread may call.

A call is sent only when the definition the server lists now is the one an admin accepted
(its digest); otherwise nothing is sent and the call fails saying it is held. Once the call
was handed to the connection it is never sent again: a connection lost after that ends the
call `lost`. The server's `isError` is `failed` with its own text. Progress the server
reports for a call goes to the relay the calling thread set (`relaying`): the surface
waiting for the answer passes it on to its own caller.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from webplatform.process import confine
from webplatform.process.outcome import RunResult
from webplatform.registry.model import ServerSpec
from webplatform.registry.servers import definition_digest, pinned_definition
from webplatform.telemetry import spans

# The MCP SDK (a second of imports) is loaded where a server is started or answers: every
# platform configures this pool, and most processes never start a server.
if TYPE_CHECKING:
    import mcp_types as types

    from webplatform.process.server_link import Launch, Link

DEFAULT_TIMEOUT_S = 60.0
# How long a server may take to start and list its tools.
START_TIMEOUT_S = 60.0
# The first wait after a crash, doubled per crash in a row, at most `_BACKOFF_MAX_S`.
_BACKOFF_S = 0.5
_BACKOFF_MAX_S = 30.0
_ERROR_MAX_CHARS = 2000


# (progress, total, message) an upstream server reported, called on the pool's event loop: it
# must be quick and may not block.
Relay = Callable[[float, float | None, str | None], None]
_RELAY: ContextVar[Relay | None] = ContextVar("aat_upstream_progress", default=None)


@contextmanager
def relaying(relay: Relay) -> Iterator[None]:
    """Within it, upstream calls made by this thread (or a context copied from it) send
    their servers' progress to `relay`."""
    token = _RELAY.set(relay)
    try:
        yield
    finally:
        _RELAY.reset(token)


class ServerNotStarted(Exception):
    """A server that did not start or answer; the message is one line saying why."""


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0

    def wait_s(self) -> float:
        """How long to wait before the next start (0 without a crash)."""
        if not self.count:
            return 0.0
        wait = min(_BACKOFF_MAX_S, _BACKOFF_S * 2.0 ** (self.count - 1))
        return max(0.0, self.last + wait - time.monotonic())


Key = tuple[str, str, str]


class ServerPool:
    """Every live connection of this process to an upstream server, by (server, its
    settings, workspace)."""

    def __init__(self, idle_s: float = 300.0) -> None:
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._starting: dict[Key, threading.Lock] = {}
        self._links: dict[Key, Link] = {}
        self._failures: dict[Key, _Failures] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        # Counts listings: the platform records new definitions when it moves.
        self.generation = 0
        self.listed: dict[str, dict[str, dict[str, Any]]] = {}
        self._listeners: list[Callable[[str], None]] = []

    def on_change(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call `listener(server)` (on the pool's loop: quick, never blocking) whenever a
        server's tools were listed again after it said they changed; the function that
        stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _relisted(self, link: Link) -> None:
        """A server listed its tools again: what the platform records (held when new or
        changed) moves on, and every listener is told."""
        name = link.launch.server.name
        with self._lock:
            self.listed[name] = dict(link.tools)
            self.generation += 1
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):  # one listener's fault is not the others'
                listener(name)

    def loop(self) -> asyncio.AbstractEventLoop:
        """The pool's event loop, started on first use."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="aat-mcp-servers", daemon=True
                )
                thread.start()
                asyncio.run_coroutine_threadsafe(self._reap_idle(), loop)
                self._loop = loop
            return self._loop

    def link(self, launch: Launch) -> Link:
        """The live connection to `launch`'s server, started (after any backoff) if there is
        none; raises what stopped it from starting."""
        key = _key(launch)
        with self._lock:
            starting = self._starting.setdefault(key, threading.Lock())
        with starting:
            link = self._links.get(key)
            if link is not None and link.client is not None and not link.closing.is_set():
                link.last_used = time.monotonic()
                return link
            failures = self._failures.setdefault(key, _Failures())
            if link is not None and link.crashed:
                failures.count, failures.last = failures.count + 1, time.monotonic()
            time.sleep(failures.wait_s())
            try:
                link = self._start(launch)
            except BaseException:
                failures.count, failures.last = failures.count + 1, time.monotonic()
                raise
            self._links[key] = link
            failures.count = 0
            with self._lock:
                self.listed[launch.server.name] = dict(link.tools)
                self.generation += 1
            return link

    def _start(self, launch: Launch) -> Link:
        from webplatform.process.server_link import Link, failure, hold

        loop = self.loop()
        link = Link(launch, on_listed=self._relisted)

        holding: list[asyncio.Task[None]] = []

        async def start() -> Link:
            ready: asyncio.Future[None] = loop.create_future()
            holding.append(loop.create_task(hold(link, ready)))
            await ready
            return link

        future = asyncio.run_coroutine_threadsafe(start(), loop)
        try:
            return future.result(timeout=START_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            # A server stuck before its tool list (one printing garbage, one that never
            # answers) holds no `closing` wait yet: cancelling the hold stops its process.
            for task in holding:
                loop.call_soon_threadsafe(task.cancel)
            link.closing.set()
            raise ServerNotStarted(f"it did not answer within {START_TIMEOUT_S:g} s") from None
        except Exception as exc:
            time.sleep(0.05)  # its exit and last words are on their way
            raise ServerNotStarted(failure(link, exc)) from exc

    def links(self) -> list[Link]:
        """The connections this process holds now."""
        return list(self._links.values())

    def stop_all(self) -> None:
        """Stop every server of this process (at exit, and in tests)."""
        loop = self._loop
        if loop is None:
            return
        links = list(self._links.values())
        self._links.clear()
        with self._lock:
            self.listed.clear()

        async def stop() -> None:
            for link in links:
                link.closing.set()
            for link in links:
                with anyio.move_on_after(10):
                    await link.ended.wait()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=30)

    async def _reap_idle(self) -> None:
        while True:
            await asyncio.sleep(max(0.05, min(5.0, self.idle_s / 4)))
            now = time.monotonic()
            for key, link in list(self._links.items()):
                if link.in_flight == 0 and now - link.last_used > self.idle_s:
                    link.closing.set()
                    self._links.pop(key, None)

    def call(
        self, link: Link, tool: str, args: dict[str, Any], limit: float
    ) -> concurrent.futures.Future[types.CallToolResult]:
        """Send one call on `link`, once; its future answer. The server's progress goes to
        this thread's relay, when one is set (`relaying`)."""
        relay = _RELAY.get()
        parent = spans.current_context()
        server = link.launch.server
        traced = {"aat.server": server.name, "network.transport": "tcp" if server.url else "pipe"}

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            assert relay is not None
            with contextlib.suppress(Exception):  # progress is a courtesy: the call goes on
                relay(progress, total, message)

        async def send() -> types.CallToolResult:
            client = link.client
            if client is None:
                raise ConnectionError("the connection had ended")
            with spans.upstream_call(parent, tool, traced) as span, anyio.fail_after(limit):
                result = await client.call_tool(
                    tool, args, progress_callback=on_progress if relay is not None else None
                )
                if result.is_error:
                    spans.failed(span, "tool_error")
                return result

        return asyncio.run_coroutine_threadsafe(send(), self.loop())


POOL = ServerPool()
atexit.register(POOL.stop_all)


def configure(idle_s: float) -> None:
    """Set how long an unused server is kept (`AAT_SERVER_IDLE_S`)."""
    POOL.idle_s = idle_s


def _key(launch: Launch) -> Key:
    settings = replace(launch.server, accepted=())
    secrets = repr(sorted(launch.secrets.items()))
    return (launch.server.name, repr(settings) + secrets, str(launch.workspace))


def workspace_of(fence: confine.Fence, caller_cwd: Path | None) -> Path | None:
    """The workspace a server is started for: the caller's, else the first of
    `AAT_WORKSPACES`, else none."""
    paths = confine.workspaces_for(fence, caller_cwd).paths
    return paths[0] if paths else None


def run(
    call: Any,
    *,
    on_start: Callable[[int], None] | None = None,
    on_tick: Callable[[], None] | None = None,
    tick_s: float = 1.0,
    go_ahead: Callable[[], None] | None = None,
) -> RunResult:
    """`runner.run` for an action of a server's tool (`call` is its `runner.ToolCall`)."""
    from webplatform.process.server_link import Launch

    started = time.monotonic()
    server = call.tool.server
    fence = call.fence or confine.Fence(home=call.home)
    launch = Launch(
        call.tool, workspace_of(fence, call.caller_cwd), dict(call.secrets), fence, call.caller_cwd
    )
    try:
        link = POOL.link(launch)
    except Exception as exc:  # noqa: BLE001 - a start that fails is the call's failure
        return _ended("failed", launch_problem(server, exc), started, call)
    held = _held(server, call.action.name, link.tools.get(call.action.name))
    if held is not None:
        return _ended("failed", held, started, call)
    if go_ahead is not None:
        go_ahead()
    if on_start is not None and link.pid is not None:
        on_start(link.pid)
    limit = call.action.timeout_s or call.timeout_s or DEFAULT_TIMEOUT_S
    link.in_flight += 1
    try:
        future = POOL.call(link, call.action.name, dict(call.args), limit)
        return _answer(future, on_tick, tick_s, started, call)
    finally:
        link.in_flight -= 1
        link.last_used = time.monotonic()


def _answer(
    future: concurrent.futures.Future[types.CallToolResult],
    on_tick: Callable[[], None] | None,
    tick_s: float,
    started: float,
    call: Any,
) -> RunResult:
    """Wait for the answer, ticking; what it amounts to. A tick that raises cancels the
    call (the caller's failure) and propagates."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    server = call.tool.server.name
    while not concurrent.futures.wait([future], timeout=tick_s).done:
        if on_tick is not None:
            try:
                on_tick()
            except BaseException:
                future.cancel()
                raise
    try:
        result = future.result()
    except TimeoutError:
        limit = call.action.timeout_s or call.timeout_s or DEFAULT_TIMEOUT_S
        said = f"{server} did not answer within {limit:g} s (its tools' timeout_s)"
        return _ended("timed_out", said, started, call)
    except MCPError as exc:
        if exc.code == types.CONNECTION_CLOSED:
            return _ended("lost", _lost(server), started, call)
        return _ended("failed", f"{server} refused the call: {exc}", started, call)
    except Exception:  # noqa: BLE001 - the connection broke after the call was sent
        return _ended("lost", _lost(server), started, call)
    if result.is_error:
        return _ended("failed", _text(result) or f"{server} reported an error", started, call)
    body: dict[str, Any] = {
        "content": [
            c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content
        ]
    }
    if result.structured_content is not None:
        body["structuredContent"] = result.structured_content
    return RunResult("succeeded", 0, body, "", "", None, time.monotonic() - started, None)


def _lost(server: str) -> str:
    return (
        f"the connection to {server} was lost after the call was sent; it is not sent "
        "again (whether it took effect is unknown: check, then ask again if it did not)"
    )


def _text(result: types.CallToolResult) -> str:
    import mcp_types as types

    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _held(server: ServerSpec, tool: str, listed: dict[str, Any] | None) -> str | None:
    """Why `tool` may not be called now (its definition gone, or not the accepted one)."""
    if listed is None:
        return f"{server.name} no longer offers {tool!r}; nothing was sent"
    if definition_digest(pinned_definition(listed)) != server.accepted_digest(tool):
        return (
            f"the definition of {server.name} {tool} changed since it was accepted; it is held "
            f"and nothing was sent until an admin runs `aat servers accept {server.name}`"
        )
    return None


def launch_problem(server: ServerSpec, exc: BaseException) -> str:
    """One line saying why `server` could not be started or reached."""
    why = str(exc).strip() or type(exc).__name__
    return f"could not start or reach MCP server {server.name}: {why}"


def _ended(outcome: Any, error: str, started: float, call: Any) -> RunResult:
    error = call.redact(error)[:_ERROR_MAX_CHARS]
    return RunResult(outcome, None, None, "", "", error, time.monotonic() - started, None)
