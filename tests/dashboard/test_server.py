"""`aat serve`'s uvicorn server: its idle loop waits on no timer, yet every response carries
the Date of its own second, and being told to stop ends it at once."""

from __future__ import annotations

import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import uvicorn
from serving import free_port

from dashboard.server import Server


async def _hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


def _date(url: str) -> float:
    response = httpx.get(url, timeout=5)
    assert response.text == "hello"
    return parsedate_to_datetime(response.headers["date"]).timestamp()


def test_each_response_has_the_current_date_and_stopping_is_at_once() -> None:
    port = free_port()
    config = uvicorn.Config(_hello, host="127.0.0.1", port=port, lifespan="off", log_level="error")
    server = Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    url = f"http://127.0.0.1:{port}/"
    try:
        time.sleep(0.5)  # idle: nothing refreshes the header meanwhile
        assert abs(_date(url) - time.time()) < 1.2
        time.sleep(1.5)
        assert abs(_date(url) - time.time()) < 1.2, "the Date header is stale"
    finally:
        stopping = time.monotonic()
        server.should_exit = True  # from another thread, as tests and signals do
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert time.monotonic() - stopping < 2, "the sleeping loop did not see it was told to stop"
