"""A legacy MCP session works on any replica: its requests reach the replica that owns it.

Two `/mcp` servers on one database and one AAT_HOME stand for two replicas behind a balancer.
Attacks: a session id naming an address of the attacker's choosing, and a forwarded request
without the replicas' signature.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp_helpers import serve_mcp

from webplatform.mcp.transports.replicas import (
    CLIENT_HEADER,
    FORWARD_HEADER,
    SESSION_HEADER,
    name_session,
    read_session,
    replica_key,
)
from webplatform.platform import Platform

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


@pytest.fixture
def replicas(platform: Platform) -> Iterator[tuple[str, str]]:
    with serve_mcp(platform) as first, serve_mcp(platform) as second:
        yield f"{first}/mcp", f"{second}/mcp"


def _open(url: str) -> str:
    r = httpx.post(url, json=INIT, headers=HEADERS)
    assert r.status_code == 200, r.text
    session = r.headers[SESSION_HEADER]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    sent = httpx.post(url, json=initialized, headers={**HEADERS, SESSION_HEADER: session})
    assert sent.status_code == 202, sent.text
    return session


def _post(url: str, message: dict[str, Any], session: str, **extra: str) -> httpx.Response:
    return httpx.post(url, json=message, headers={**HEADERS, SESSION_HEADER: session, **extra})


def test_a_session_opened_on_one_replica_is_served_through_the_other(
    platform: Platform, replicas: tuple[str, str]
) -> None:
    first, second = replicas
    session = _open(first)
    owner = read_session(replica_key(platform.settings.home), session)
    assert owner is not None and first.startswith(owner.owner)
    for url in (second, first, second):
        listed = _post(url, LIST, session)
        assert listed.status_code == 200, listed.text
        assert "run_tool" in listed.text
    # Ended through the other replica: gone on both.
    assert httpx.delete(second, headers={**HEADERS, SESSION_HEADER: session}).status_code == 200
    for url in replicas:
        assert _post(url, LIST, session).status_code == 404


class Listener:
    """A TCP port that counts who connects to it (the attacker's server)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()


def test_a_session_id_naming_another_address_is_not_followed(
    platform: Platform, replicas: tuple[str, str]
) -> None:
    first, _second = replicas
    session = _open(first)
    local = session.split(".")[0]
    attacker = Listener()
    elsewhere = f"http://127.0.0.1:{attacker.port}"
    forged = [
        name_session(b"k" * 32, local, elsewhere),  # tagged under a key the replicas lack
        ".".join([local, name_session(b"", local, elsewhere).split(".")[1], session.split(".")[2]]),
    ]
    for value in forged:
        r = _post(first, LIST, value, Authorization="Bearer secret")
        assert r.status_code == 404 and "Session not found" in r.text
    time.sleep(0.3)  # the attacker's port would have been reached by now
    attacker.stop.set()
    assert attacker.connections == 0


def test_a_forwarded_request_without_the_replicas_signature_is_refused(
    platform: Platform, replicas: tuple[str, str]
) -> None:
    first, _second = replicas
    session = _open(first)
    stamp = str(int(time.time()))
    for signature in (f"{stamp}.{'0' * 64}", "not-a-signature", ""):
        r = _post(first, LIST, session, **{FORWARD_HEADER: signature, CLIENT_HEADER: "10.6.6.6"})
        assert r.status_code == 403 and "replica signature" in r.text
