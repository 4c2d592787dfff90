"""A database server that is not up yet when aat starts (SPEC §24): one line, not a traceback.

A long-running process (`aat worker`, `aat serve`) says once which database it cannot reach
(password hidden) and keeps asking, then starts and works as soon as the server answers; a
one-shot command says the same line and exits 1. The server comes up through a real TCP
forwarder to the test session's PostgreSQL, opened on the port aat was told only after aat
has started.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from collections.abc import Iterator

import pytest
from proc_helpers import AAT, Procs, aat_env, outbox_files, state_of, wait_for
from serving import free_port
from sqlalchemy import make_url
from test_faults import _queue as queue

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import JobState

pytestmark = [pytest.mark.integration, pytest.mark.postgresql]

PASSWORD = "not-to-be-printed"


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def forwarder(port: int, to: tuple[str, int]) -> Iterator[None]:
    """Listen on 127.0.0.1:`port` and forward every connection to `to`."""
    listener = socket.create_server(("127.0.0.1", port))
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                client, _ = listener.accept()
                upstream = socket.create_connection(to)
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield
    finally:
        stop.set()
        listener.close()


def _unreachable(settings: Settings, port: int) -> tuple[str, tuple[str, int]]:
    """The settings' database URL moved to `port` (with a password aat must hide), and the
    address the real server listens on."""
    real = make_url(settings.db_url.get_secret_value())
    moved = real.set(host="127.0.0.1", port=port, password=real.password or PASSWORD)
    return moved.render_as_string(hide_password=False), (
        real.host or "127.0.0.1",
        real.port or 5432,
    )


def test_a_one_shot_command_says_one_line_and_exits(pg_settings: Settings) -> None:
    url, _ = _unreachable(pg_settings, free_port())
    env = aat_env(pg_settings) | {"AAT_DB_URL": url}
    done = subprocess.run(
        [*AAT, "rules", "list"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("aat rules: the database at postgresql")
    assert "cannot be reached (" in line and "Connection refused" in line
    assert PASSWORD not in done.stderr and ":***@" in line


def test_a_worker_started_before_its_database_waits_then_runs_jobs(
    pg_settings: Settings, procs: Procs
) -> None:
    platform = Platform(pg_settings)
    job_id = queue(platform, approved=True)
    port = free_port()
    url, real = _unreachable(pg_settings, port)
    procs.start("worker", ["worker"], aat_env(pg_settings) | {"AAT_DB_URL": url})
    wait_for(lambda: "cannot be reached" in procs.log("worker"), 60, "the worker's one line")
    assert state_of(platform.engine, job_id) == JobState.approved
    with forwarder(port, real):
        wait_for(
            lambda: state_of(platform.engine, job_id) == JobState.succeeded, 60, "the job to run"
        )
    log = procs.log("worker")
    assert log.count("cannot be reached") == 1, log
    assert "Traceback" not in log and PASSWORD not in log
    assert len(outbox_files(pg_settings)) == 1
    platform.engine.dispose()
