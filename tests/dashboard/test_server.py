"""`aat serve`'s uvicorn server: its idle loop waits on no timer, yet every response carries
the Date of its own second, and being told to stop ends it at once."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from serving import uvicorn_in_thread

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
    served = uvicorn_in_thread(_hello, server_class=Server, lifespan="off", log_level="error")
    with served as base:
        url = f"{base}/"
        time.sleep(0.5)  # idle: nothing refreshes the header meanwhile
        assert abs(_date(url) - time.time()) < 1.2
        time.sleep(1.5)
        assert abs(_date(url) - time.time()) < 1.2, "the Date header is stale"
        # Leaving the block tells the server to stop from another thread, as tests and
        # signals do, and waits for its thread to end.
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 2, "the sleeping loop did not see it was told to stop"
