"""A real `aat serve` process, headless Debian Chromium driven by Playwright, and an attacker
page on another loopback port."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from browser_helpers import (
    CHROMIUM,
    CHROMIUM_ARGS,
    OPERATOR,
    Attacker,
    Server,
    add_to_store,
    log_in,
    serve_env,
)
from playwright.sync_api import Browser, Page, Playwright, sync_playwright
from serving import aat_serve, free_port


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """`python -m webplatform serve` on a free port, with operator alice already added."""
    home, port = tmp_path / "aat-home", free_port()
    env = serve_env(home, port)
    add_to_store(home, [(OPERATOR, None)])
    log = tmp_path / "serve.log"
    started: list[subprocess.Popen[bytes]] = []
    with aat_serve(env=env, port=port, log=log, started=started) as url:
        yield Server(url=url, port=port, home=home, log=log, env=env, process=started[0])


# Module scope, not session: sync Playwright keeps an asyncio loop marked running in this
# thread while it is open, which would break every anyio test collected after this folder.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    """The Playwright driver."""
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def chromium(playwright: Playwright) -> Iterator[Browser]:
    """Debian's Chromium, headless."""
    b = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield b
    b.close()


@pytest.fixture
def page(chromium: Browser, server: Server) -> Iterator[Page]:
    """A fresh browser context, logged in as alice through the login form."""
    pg = log_in(chromium, server.url, OPERATOR)
    yield pg
    pg.context.close()


@pytest.fixture
def attacker() -> Iterator[Attacker]:
    """Serves whatever HTML a test puts in `attacker.html[path]`."""
    pages: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = pages.get(self.path, "not found").encode()
            self.send_response(200 if self.path in pages else 404)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield Attacker(url=f"http://127.0.0.1:{httpd.server_address[1]}", html=pages)
    finally:
        httpd.shutdown()
        httpd.server_close()
