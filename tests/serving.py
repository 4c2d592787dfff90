"""A real `aat serve` process for tests that talk to it over HTTP (browser, MCP clients)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def aat_serve(
    *,
    env: Mapping[str, str],
    port: int,
    log: Path,
    command: Sequence[str] = (sys.executable, "-m", "webplatform"),
    cwd: Path | None = None,
    args: Sequence[str] = (),
) -> Iterator[str]:
    """`COMMAND serve --port PORT ARGS` (by default `python -m webplatform`), healthy; yields
    its base URL, then stops it."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*command, "serve", "--port", str(port), *args],
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"aat serve exited {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"aat serve did not answer /healthz:\n{log.read_text()}")


@contextmanager
def uvicorn_in_thread(app: Any, *, timeout_s: float = 15) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port in a thread; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
