"""Servers for tests that talk HTTP: a real `aat serve` process (`aat_serve`, with the
environment `aat_env` makes) or an ASGI app on uvicorn in a thread (`uvicorn_in_thread`).
Every test that starts a server starts it here, on a port from `free_port()`."""

from __future__ import annotations

import os
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


def aat_env(home: Path | None = None, /, **extra: str) -> dict[str, str]:
    """The environment for an `aat` process: this one's without any AAT_* setting, then
    AAT_HOME=`home` (when given), unbuffered output, and `extra` as given (AAT_X="...")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
    if home is not None:
        env["AAT_HOME"] = str(home)
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


@contextmanager
def aat_serve(
    *,
    env: Mapping[str, str],
    port: int,
    log: Path,
    command: Sequence[str] = (sys.executable, "-m", "webplatform"),
    cwd: Path | None = None,
    args: Sequence[str] = (),
    started: list[subprocess.Popen[bytes]] | None = None,
) -> Iterator[str]:
    """`COMMAND serve --port PORT ARGS` (by default `python -m webplatform`), healthy; yields
    its base URL, then stops it. The process is appended to `started` when given (a test
    that stops it itself)."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*command, "serve", "--port", str(port), *args],
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
        )
    if started is not None:
        started.append(proc)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_healthy(url: str, proc: subprocess.Popen[Any], log: Path) -> None:
    """Return once `aat serve` at `url` answers /healthz; fail with its log if it exits first
    or does not answer within a minute."""
    deadline = time.monotonic() + 60
    # One client for every poll: `httpx.get` makes a client each time, and its TLS context
    # (the CA bundle parsed again) cost ~30 ms of CPU a poll, beside the starting server.
    with httpx.Client(timeout=1) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"aat serve exited {proc.returncode}:\n{log.read_text(errors='replace')}"
                )
            try:
                if client.get(f"{url}/healthz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    raise RuntimeError(f"aat serve did not answer /healthz:\n{log.read_text(errors='replace')}")


@contextmanager
def uvicorn_in_thread(
    app: Any,
    *,
    timeout_s: float = 15,
    server_class: type[uvicorn.Server] = uvicorn.Server,
    **config: Any,
) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port in a thread (`server_class`, with `config`
    for uvicorn.Config); yields its base URL, then stops the server and fails if it does not
    end within 10 s."""
    port = free_port()
    config = {"log_level": "warning", **config}
    server = server_class(uvicorn.Config(app, host="127.0.0.1", port=port, **config))
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
    if thread.is_alive():
        raise RuntimeError("uvicorn did not stop within 10 s of being told to")
