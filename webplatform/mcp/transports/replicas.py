"""Legacy MCP sessions on any replica: a session is served by the `aat serve` that opened it.

The MCP SDK keeps a 2025-era session (`Mcp-Session-Id`) as live tasks and streams in the
memory of the process that answered its `initialize`; they cannot be stored and resumed
elsewhere. Stateless mode would need no memory, but it cannot send a server-to-client request
(the SDK raises `NoBackChannelError`), so a waiting call could not ask for its URL elicitation.
So behind a load balancer without stickiness every replica:

- hands out session ids that name it: `<SDK id>.<owner address>.<tag>`, the tag an HMAC under
  a key derived from `AAT_HOME/mcp-state.key` (which replicas share already: sealed
  `requestState` and task ids need it too). A database writer does not hold it, so nobody
  can make a replica send a client's request, bearer token included, to an address of their
  choosing;
- serves the requests of its own sessions, and forwards those of another replica's session to
  that replica (streamed both ways, SSE included), signed with the same key and carrying the
  client's address, which the owner believes only with a valid signature;
- answers 404 `Session not found` when the owner no longer answers, so the client opens a new
  session, as the MCP specification says.

`initialize` and 2026-07-28 (sessionless) requests are served where they land. A replica's
address is `AAT_REPLICA_URL` when set, else the address its request came in on.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from webplatform.mcp.sealing import state_key

logger = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
# `<unix time>.<hex HMAC>` over the request, set only by a replica forwarding it.
FORWARD_HEADER = "aat-replica-forward"
# The address of the client the forwarding replica served, believed with a valid signature.
CLIENT_HEADER = "aat-replica-client"
# A forwarded request older (or newer) than this is refused: replicas' clocks agree roughly.
FRESH_S = 60
_PURPOSE = b"aat/mcp/replica/v1"
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length"}
)
_TIMEOUT = httpx.Timeout(connect=3.0, read=None, write=30.0, pool=None)


def replica_key(home: Path) -> bytes:
    """The key replicas name sessions and sign forwarded requests with (from the sealing key)."""
    return hmac.new(state_key(home), _PURPOSE, hashlib.sha256).digest()


@dataclass(frozen=True)
class SessionName:
    """A session id read back: the SDK's own id, and the base URL of the replica that owns it."""

    local: str
    owner: str


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _tag(key: bytes, local: str, owner: str) -> str:
    return _b64(hmac.new(key, f"session\n{local}\n{owner}".encode(), hashlib.sha256).digest()[:16])


def name_session(key: bytes, local: str, owner: str) -> str:
    """The session id a client sees: the SDK's id, its owner replica, and a tag binding them."""
    return f"{local}.{_b64(owner.encode())}.{_tag(key, local, owner)}"


def read_session(key: bytes, value: str) -> SessionName | None:
    """The session a client named, or None when the id was not made by a replica with `key`."""
    parts = value.split(".")
    if len(parts) != 3:
        return None
    local, address, tag = parts
    try:
        owner = base64.urlsafe_b64decode(address + "=" * (-len(address) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    if not hmac.compare_digest(tag.encode(), _tag(key, local, owner).encode()):
        return None
    return SessionName(local=local, owner=owner)


def _signature(key: bytes, stamp: str, scope: Scope, client: str, body: bytes) -> str:
    target = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    session = Headers(scope=scope).get(SESSION_HEADER, "")
    head = f"forward\n{stamp}\n{scope['method']}\n{session}\n{client}\n".encode()
    message = head + target + b"?" + query + b"\n" + hashlib.sha256(body).digest()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def _not_found() -> JSONResponse:
    # The SDK's own answer for an unknown session: the client initializes again.
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
    return JSONResponse(body, status_code=404)


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands out `body` once, then waits on the real one (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class ReplicaRouter:
    """Serves this replica's sessions through `app`, forwards other replicas' to their owner."""

    def __init__(self, app: ASGIApp, *, home: Path, address: str = "") -> None:
        self.app = app
        self.home = home
        self.address = address.rstrip("/")
        self._key: bytes | None = None
        self._client: httpx.AsyncClient | None = None

    @property
    def key(self) -> bytes:
        """The replica key, read from `AAT_HOME` on first use."""
        if self._key is None:
            self._key = replica_key(self.home)
        return self._key

    def own_address(self, scope: Scope) -> str:
        """This replica's base URL: `AAT_REPLICA_URL`, else where this request came in."""
        if self.address:
            return self.address
        host, port = scope.get("server") or ("127.0.0.1", 80)
        host = f"[{host}]" if ":" in str(host) else str(host)
        return f"{scope.get('scheme', 'http')}://{host}:{port}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Route one request to this replica's session manager or to the session's owner."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        forwarded = headers.get(FORWARD_HEADER)
        if forwarded is not None:
            body = await _read_body(receive)
            client = headers.get(CLIENT_HEADER, "")
            if not self._genuine(forwarded, scope, client, body):
                refusal = {"error": "a forwarded MCP request without a valid replica signature"}
                await JSONResponse(refusal, status_code=403)(scope, receive, send)
                return
            scope = {**scope, "client": (client, 0)}
            receive = _replay(body, receive)
        value = headers.get(SESSION_HEADER)
        if value is None:
            await self._local(scope, receive, send)
            return
        name = read_session(self.key, value)
        if name is None:
            await _not_found()(scope, receive, send)
        elif forwarded is not None or name.owner == self.own_address(scope):
            await self._local(_with_session(scope, name.local), receive, send)
        else:
            await self._forward(scope, receive, send, name)

    def _genuine(self, forwarded: str, scope: Scope, client: str, body: bytes) -> bool:
        stamp, _, signature = forwarded.partition(".")
        if not stamp.isdigit() or abs(time.time() - int(stamp)) > FRESH_S:
            return False
        expected = _signature(self.key, stamp, scope, client, body)
        return hmac.compare_digest(signature.encode(), expected.encode())

    async def _local(self, scope: Scope, receive: Receive, send: Send) -> None:
        owner = self.own_address(scope)

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": self._renamed(message["headers"], owner)}
            await send(message)

        await self.app(scope, receive, named)

    def _renamed(self, headers: list[tuple[bytes, bytes]], owner: str) -> list[tuple[bytes, bytes]]:
        out = []
        for name, value in headers:
            if name.lower() == SESSION_HEADER.encode():
                value = name_session(self.key, value.decode("latin-1"), owner).encode("latin-1")
            out.append((name, value))
        return out

    async def _forward(self, scope: Scope, receive: Receive, send: Send, name: SessionName) -> None:
        body = await _read_body(receive)
        client = scope.get("client") or ("", 0)
        stamp = str(int(time.time()))
        signature = _signature(self.key, stamp, scope, str(client[0]), body)
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() not in _HOP_BY_HOP
        ]
        headers += [(FORWARD_HEADER, f"{stamp}.{signature}"), (CLIENT_HEADER, str(client[0]))]
        target = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        query = scope.get("query_string", b"").decode("latin-1")
        url = name.owner + target + (f"?{query}" if query else "")
        http = self._http()
        request = http.build_request(scope["method"], url, headers=headers, content=body)
        try:
            response = await http.send(request, stream=True)
        except httpx.TransportError as exc:
            logger.info("the replica owning an MCP session does not answer (%s): 404", exc)
            await _not_found()(scope, receive, send)
            return
        try:
            await _relay(response, receive, send)
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        """Close the connections kept to other replicas (at shutdown)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=_TIMEOUT, trust_env=False)
        return self._client


def _with_session(scope: Scope, local: str) -> Scope:
    key = SESSION_HEADER.encode()
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != key]
    return {**scope, "headers": [*headers, (key, local.encode("latin-1"))]}


async def _relay(response: httpx.Response, receive: Receive, send: Send) -> None:
    """Stream the owner's answer to the client; a client that hangs up ends it at once."""
    headers = [
        (k, v) for k, v in response.headers.raw if k.decode("latin-1").lower() not in _HOP_BY_HOP
    ]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})

    async def until_gone(done: Callable[[], Awaitable[Any]]) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        await done()

    async with anyio.create_task_group() as tg:

        async def stop() -> None:
            tg.cancel_scope.cancel()

        tg.start_soon(until_gone, stop)
        try:
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.TransportError as exc:
            # The owner went away mid-answer: the client sees the stream end.
            logger.info("the replica owning an MCP session stopped mid-answer (%s)", exc)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        tg.cancel_scope.cancel()
