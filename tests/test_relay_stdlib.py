"""`aat mcp --url`'s HTTP side (`mcp.transports.upstream`), on the standard library alone."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest

from webplatform.mcp.transports import upstream


def test_the_url_mode_loads_only_the_standard_library() -> None:
    code = (
        "import sys, webplatform.cli, webplatform.cli.remote, webplatform.mcp.transports.relay; "
        "print(sorted(m.split('.')[0] for m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(done.stdout.replace("'", '"')))
    assert not loaded & {
        *("mcp", "mcp_types", "pydantic", "sqlalchemy", "anyio", "httpx2"),
        "opentelemetry",  # traces are sent by the `aat serve` it relays to, never by the relay
    }


def events(text: bytes) -> list[bytes]:
    stream = cast(Any, io.BufferedReader(io.BytesIO(text)))  # what sse_data reads: readline
    return list(upstream.sse_data(stream))


def test_server_sent_events_give_each_message_in_order() -> None:
    stream = (
        b": ping\r\n\r\n"  # a keep-alive comment
        b'id: 7\r\nevent: message\r\ndata: {"a":1}\r\n\r\n'
        b"event: message\r\ndata: \r\n\r\n"  # a priming event: no data
        b'data: {"b":\r\ndata: 2}\r\n\r\n'  # data over two lines
        b"event: other\r\ndata: {}\r\n\r\n"
        b'data: {"c":3}'  # the stream ended without its blank line
    )
    assert events(stream) == [b'{"a":1}', b'{"b":\n2}', b'{"c":3}']


def test_a_sessionless_request_carries_its_routing_headers() -> None:
    meta = {upstream.VERSION_META: "2026-07-28"}
    call = {"method": "tools/call", "params": {"name": "run_tool", "_meta": meta}}
    headers = upstream.request_headers(call, session="s1", version="2025-11-25")
    assert headers["MCP-Protocol-Version"] == "2026-07-28"
    assert headers["Mcp-Method"] == "tools/call" and headers["Mcp-Name"] == "run_tool"
    assert upstream.SESSION_HEADER not in headers
    legacy = upstream.request_headers(
        {"method": "tools/call", "params": {"name": "run_tool"}}, session="s1", version="v"
    )
    assert legacy[upstream.SESSION_HEADER] == "s1" and legacy["MCP-Protocol-Version"] == "v"
    assert "Mcp-Method" not in legacy


def test_a_name_that_is_not_plain_ascii_travels_in_base64() -> None:
    assert upstream.encode_header_value("run_tool") == "run_tool"
    encoded = upstream.encode_header_value("café")
    assert encoded.startswith("=?base64?") and encoded.endswith("?=")
    assert base64.b64decode(encoded[9:-2]).decode() == "café"
    assert upstream.encode_header_value(" padded").startswith("=?base64?")


def test_a_url_that_is_not_http_is_refused_in_one_line() -> None:
    for url in ("127.0.0.1:8000/mcp", "ftp://host/mcp", "http://host:notaport/mcp"):
        try:
            upstream.Endpoint(url, "")
        except upstream.RelayError as exc:
            assert "\n" not in str(exc) and "ending in /mcp" in str(exc)
        else:
            raise AssertionError(f"{url} was taken")


def test_a_request_cancelled_before_its_post_left_is_never_sent() -> None:
    """A cancel can reach the relay before the request's thread has opened its connection
    (a loaded machine): the POST must then not go out, or the relay sits out the call."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        pool = upstream.Pool(upstream.Endpoint(url, ""))
        cancelled = upstream.Exchange(pool)
        cancelled.abort()  # before `open`: no connection to close yet
        with pytest.raises(ConnectionAbortedError), cancelled.open("POST", {}, b"{}"):
            pass
        with upstream.Exchange(pool).open("POST", {}, b"{}") as answer:
            assert answer.status == 200
        server.shutdown()
    assert seen == ["/mcp"]  # only the request that was not cancelled
