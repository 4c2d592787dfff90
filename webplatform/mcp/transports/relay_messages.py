"""JSON-RPC messages as the thin relay (`aat mcp --url`) reads, makes and writes them.

The client's lines from stdin; its stdout, written whole by any thread once the server is
known to be aat; the answers the relay makes itself (a line it cannot read, a request the
server could not answer); and its own question to the server, `server/discover`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from typing import Any

from webplatform import __version__
from webplatform.mcp.transports.upstream import (
    HOW_TO_FIX_URL,
    MODERN_PROBE_VERSION,
    SERVER_NAME,
    VERSION_META,
)

CHUNK = 65536
COMPACT = (",", ":")
PARSE_ERROR, INVALID_REQUEST, INTERNAL_ERROR = -32700, -32600, -32603
PROBE_ID = "aat-relay-probe"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


class Gate:
    """Whether the server at the URL is aat: nothing reaches stdout before that is known."""

    def __init__(self) -> None:
        self._known = threading.Event()
        self.failure: str | None = None

    def open(self) -> None:
        self._known.set()

    def fail(self, reason: str) -> None:
        self.failure = reason
        self._known.set()

    def wait(self) -> bool:
        """Block until known; True when the server is aat."""
        self._known.wait()
        return self.failure is None


class Output:
    """The client's stdout: whole JSON-RPC messages, one a line, from any thread."""

    def __init__(self, gate: Gate, broken: threading.Event) -> None:
        self.gate = gate
        self.broken = broken
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        """Write one message (its JSON text) once the server is known to be aat."""
        if not self.gate.wait():
            return
        if b"\n" in data or b"\r" in data:  # a multi-line SSE event: one line for stdio
            data = dumps(json.loads(data))
        view = memoryview(data + b"\n")
        with self._lock:
            try:
                while view:
                    view = view[os.write(1, view) :]
            except OSError:
                self.broken.set()

    def send(self, message: dict[str, Any]) -> None:
        """Write a message made here."""
        self.write(dumps(message))


def stdin_lines() -> Iterator[bytes]:
    """The client's lines, as they come, until its end of input."""
    pending = b""
    while True:
        try:
            chunk = os.read(0, CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending


def dumps(message: dict[str, Any]) -> bytes:
    """A message as one line of compact JSON (UTF-8 kept as it is)."""
    return json.dumps(message, ensure_ascii=False, separators=COMPACT).encode()


def error_message(id_: Any, code: int, text: str) -> dict[str, Any]:
    """A JSON-RPC error answer."""
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": text}}


def failed_answer(id_: Any, method: str, reason: str, *, modern: bool) -> dict[str, Any]:
    """The answer to a request the server could not answer: a tool error for `tools/call`
    (the model reads it and can tell the user), an error for anything else."""
    if method != "tools/call":
        return error_message(id_, INTERNAL_ERROR, reason)
    failed = {"status": "failed", "error": reason}
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": dumps(failed).decode()}],
        "structuredContent": failed,
        "isError": True,
    }
    if modern:
        result["resultType"] = "complete"  # how a sessionless client knows the call is done
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def probe_message() -> dict[str, Any]:
    """The relay's own `server/discover`: which server answers at the URL."""
    meta = {
        VERSION_META: MODERN_PROBE_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "aat-relay", "version": __version__},
    }
    return {
        "jsonrpc": "2.0",
        "id": PROBE_ID,
        "method": "server/discover",
        "params": {"_meta": meta},
    }


def not_aat(url: str, answer: dict[str, Any]) -> str | None:
    """Why the answer to the probe is not aat's, or None."""
    error = answer.get("error")
    if error is not None:
        said = error.get("message") if isinstance(error, dict) else error
        return f"{url} did not answer as an aat MCP endpoint: {said}"
    name = server_name(answer.get("result"))
    if name != SERVER_NAME:
        return f"{url} is an MCP server named {name!r}, not aat: {HOW_TO_FIX_URL}"
    return None


def server_name(result: Any) -> Any:
    """The server's name in a handshake result: `serverInfo` (2025-11-25), or its `_meta`
    (2026-07-28)."""
    if not isinstance(result, dict):
        return None
    info = result.get("serverInfo")
    if not isinstance(info, dict):
        meta = result.get("_meta")
        info = meta.get(SERVER_INFO_META) if isinstance(meta, dict) else None
    return info.get("name") if isinstance(info, dict) else None


def is_answer_to(message: dict[str, Any], id_: Any) -> bool:
    """True when `message` is the response to request `id_` (an error without an id too:
    the server could not read the request's id, and this exchange carried only that one)."""
    if "method" in message or not ("result" in message or "error" in message):
        return False
    return message.get("id") == id_ or (message.get("id") is None and "error" in message)
