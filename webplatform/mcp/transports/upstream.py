"""The HTTP side of `aat mcp --url`: POSTs to a running `aat serve`'s `/mcp`, standard library only.

What the relay (`transports.relay`) needs of streamable HTTP and no more: an endpoint with
its bearer token, connections kept alive between short exchanges, an answer read as JSON-RPC
messages as they arrive (one JSON body, or the events of an SSE stream), the legacy session's
`Mcp-Session-Id`, and one line for every way the server can fail to be a usable aat.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from http.client import HTTPConnection, HTTPException, HTTPResponse, HTTPSConnection
from typing import Any
from urllib.parse import urlsplit

SERVER_NAME = "aat"
ACCEPT = "application/json, text/event-stream"
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
# The versions negotiated by `initialize`; any other one a request names in `_meta` is a
# sessionless (2026-07-28 and later) request, routed by its headers.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
VERSION_META = "io.modelcontextprotocol/protocolVersion"
# The sessionless version the relay's own `server/discover` (its check of the server) names.
MODERN_PROBE_VERSION = "2026-07-28"
# The params a sessionless request's `Mcp-Name` header repeats, by method.
NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
CONNECT_TIMEOUT_S = 10.0
# An idle kept-alive connection is reused only this soon: servers close theirs after a few
# seconds (uvicorn: 5), and a POST written into a closing one has to be sent again.
REUSE_WITHIN_S = 2.0
IDLE_CONNECTIONS = 4
HOW_TO_FIX_URL = "give the URL of `aat serve` ending in /mcp, e.g. http://127.0.0.1:8000/mcp"
_HEADER_SAFE = re.compile(r"^[\x20-\x7e]*$")


class RelayError(Exception):
    """The relay cannot reach a usable aat server; the message is one line saying how to fix it."""


class Endpoint:
    """Where `/mcp` is, and the token the relay sends there."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = None
            parts = parts._replace(netloc="")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RelayError(f"{url!r} is not an http(s) URL: {HOW_TO_FIX_URL}")
        self.url = url
        self.token = token
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = port or (443 if self.https else 80)
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def connect(self) -> HTTPConnection:
        """A new connection; it waits as long as the server takes to answer (a held call may
        wait minutes for an operator), after a bounded connect."""
        kind = HTTPSConnection if self.https else HTTPConnection
        conn = kind(self.host, self.port, timeout=CONNECT_TIMEOUT_S)
        conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(None)
        conn.timeout = None
        return conn

    def headers(self, extra: Mapping[str, str]) -> dict[str, str]:
        """The headers of every request: the bearer token, then `extra`."""
        base = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return {**base, **extra}


class Pool:
    """Kept-alive connections to the endpoint, each used by one exchange at a time."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._idle: list[tuple[float, HTTPConnection]] = []
        self._lock = threading.Lock()

    def take(self) -> tuple[HTTPConnection, bool]:
        """An idle connection that is fresh enough, or a new one (OSError if none can be had);
        and whether it was kept from an earlier exchange."""
        now = time.monotonic()
        with self._lock:
            while self._idle:
                since, conn = self._idle.pop()
                if now - since < REUSE_WITHIN_S:
                    return conn, True
                conn.close()
        return self.endpoint.connect(), False

    def give(self, conn: HTTPConnection) -> None:
        """Keep `conn` for the next exchange, if it is still open and there is room."""
        with self._lock:
            if conn.sock is not None and len(self._idle) < IDLE_CONNECTIONS:
                self._idle.append((time.monotonic(), conn))
                return
        conn.close()

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            for _, conn in self._idle:
                conn.close()
            self._idle.clear()


class Exchange:
    """One HTTP request to the endpoint and its answer; `abort()` ends it from another thread."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.conn: HTTPConnection | None = None
        self.aborted = False

    @contextlib.contextmanager
    def open(
        self,
        method: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        *,
        timeout: float | None = None,
    ) -> Iterator[HTTPResponse]:
        """Send the request; yields the answer (OSError or HTTPException when there is none,
        or when `timeout` passes without a byte of it)."""
        reusable = False
        try:
            response = self._send(method, headers, body, timeout)
            yield response
            reusable = response.isclosed() and not self.aborted
        finally:
            self._release(reusable)

    def _send(
        self, method: str, headers: Mapping[str, str], body: bytes | None, timeout: float | None
    ) -> HTTPResponse:
        conn, kept = self.pool.take()
        self.conn = conn
        try:
            return self._request(conn, method, headers, body, timeout)
        except (BrokenPipeError, ConnectionResetError):
            if not kept:
                raise
        # The server closed a kept connection before reading the request (an idle timeout,
        # or it stopped): the request never reached it, so a new connection sends it once.
        conn.close()
        self.conn = conn = self.pool.endpoint.connect()
        return self._request(conn, method, headers, body, timeout)

    def _unless_aborted(self) -> None:
        # Read after `self.conn` is set: an abort that came earlier found no connection to
        # close, and is honoured here instead; a later one closes the connection itself.
        if self.aborted:
            raise ConnectionAbortedError("the request was cancelled before it was sent")

    def _request(
        self,
        conn: HTTPConnection,
        method: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float | None,
    ) -> HTTPResponse:
        assert conn.sock is not None
        self._unless_aborted()
        conn.sock.settimeout(timeout)
        conn.request(method, self.pool.endpoint.target, body=body, headers=dict(headers))
        return conn.getresponse()

    def _release(self, reusable: bool) -> None:
        conn = self.conn
        if conn is None:
            return
        if reusable and conn.sock is not None:
            conn.sock.settimeout(None)
            self.pool.give(conn)
        else:
            conn.close()

    def abort(self) -> None:
        """Close the connection under a running exchange (a sessionless request's cancel)."""
        self.aborted = True
        sock = self.conn.sock if self.conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


EXCHANGE_ERRORS = (OSError, HTTPException)


def messages(response: HTTPResponse) -> Iterator[bytes]:
    """The JSON-RPC messages of an answer as they arrive: a JSON body, or each SSE event's data.

    Anything else (an empty 202, an error page) yields nothing; `response.read()` still holds
    it for `explain`.
    """
    kind = (response.getheader("Content-Type") or "").partition(";")[0].strip().lower()
    if kind == "text/event-stream":
        yield from sse_data(response)
    elif kind == "application/json":
        body = response.read()
        if body.strip():
            yield body


def sse_data(stream: HTTPResponse) -> Iterator[bytes]:
    """The data of each `message` event of a server-sent event stream, until it ends (events
    without data, such as a resumable stream's priming event, carry no message)."""
    data: list[bytes] = []
    event = b""
    while line := stream.readline():
        line = line.rstrip(b"\r\n")
        if not line:
            if any(data) and event in (b"", b"message"):
                yield b"\n".join(data)
            data, event = [], b""
            continue
        name, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value
    if any(data) and event in (b"", b"message"):
        yield b"\n".join(data)


def read_message(data: bytes) -> dict[str, Any] | None:
    """A JSON-RPC message (a JSON object with `"jsonrpc"`), or None."""
    try:
        message = json.loads(data)
    except ValueError:
        return None
    return message if isinstance(message, dict) and "jsonrpc" in message else None


def request_headers(
    message: Mapping[str, Any], *, session: str | None, version: str | None
) -> dict[str, str]:
    """The MCP headers for POSTing `message`.

    A message whose `_meta` names a sessionless protocol version carries that version and
    its method (and name) as headers, and no session; any other one the legacy session's id
    and negotiated version, once `initialize` has made them.
    """
    headers = {"Content-Type": "application/json", "Accept": ACCEPT}
    modern = modern_version(message)
    if modern is None:
        if session:
            headers[SESSION_HEADER] = session
        if version:
            headers[VERSION_HEADER] = version
        return headers
    method = str(message.get("method", ""))
    headers[VERSION_HEADER] = modern
    headers["Mcp-Method"] = method
    params = message.get("params")
    name = params.get(NAME_PARAMS.get(method, "")) if isinstance(params, dict) else None
    if isinstance(name, str):
        headers["Mcp-Name"] = encode_header_value(name)
    return headers


def modern_version(message: Mapping[str, Any]) -> str | None:
    """The sessionless protocol version `message`'s `_meta` names, or None (legacy)."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(VERSION_META) if isinstance(meta, dict) else None
    return version if isinstance(version, str) and version not in HANDSHAKE_VERSIONS else None


def encode_header_value(value: str) -> str:
    """`value` as the MCP header encoding carries it: verbatim when it is plain printable
    ASCII, else base64 inside `=?base64?...?=`."""
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and "=?base64?" not in value:
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


def unreachable(url: str, exc: BaseException) -> str:
    """One line for a server that cannot be reached at all."""
    reason = (str(exc) or type(exc).__name__).splitlines()[0]
    return f"cannot reach aat at {url}: is `aat serve` running there? ({reason})"


def explain(url: str, token: str, response: HTTPResponse, body: bytes) -> str:
    """One line for an HTTP answer that carries no JSON-RPC message."""
    status = response.status
    if status == 401:
        if not token:
            return (
                f"aat at {url} requires an agent token: set AAT_AGENT_TOKEN "
                "(an operator mints one with `aat agent add NAME`)"
            )
        return (
            f"aat at {url} refused AAT_AGENT_TOKEN (wrong or revoked): "
            "ask an operator for a new one (`aat agent add NAME`)"
        )
    said = _error_text(body)
    if status == 403 and said:
        return f"aat at {url} refused the connection: {said}"
    if 300 <= status < 400 and (where := response.getheader("Location")):
        return f"{url} answered HTTP {status} (redirects to {where}): {HOW_TO_FIX_URL}"
    if status >= 300:
        return f"{url} answered HTTP {status}: not an aat MCP endpoint ({HOW_TO_FIX_URL})"
    return f"{url} did not answer as an aat MCP endpoint ({HOW_TO_FIX_URL})"


def _error_text(body: bytes) -> str:
    """The `error` an aat refusal carries in its JSON body, on one line; else empty."""
    try:
        said = json.loads(body)
    except ValueError:
        return ""
    text = said.get("error") if isinstance(said, dict) else None
    return " ".join(text.split()) if isinstance(text, str) else ""
