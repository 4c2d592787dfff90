"""A worker cut off from PostgreSQL while its job runs (SPEC §24): the outcome is honest and
nothing runs twice.

The worker reaches PostgreSQL only through a real TCP forwarder, which the test cuts (every
connection closed, new ones refused) while the job's tool runs, and opens again later. Cut
for less time than anyone waits, the run's outcome is recorded once the link is back; cut
while another worker reaps the lease, the job stays `lost` and its late outcome is refused.
Either way the worker reconnects by itself and runs the next job.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest
from proc_helpers import Procs, aat_env, outbox_files, state_of, wait_for
from serving import free_port
from test_database_down import _pipe, _unreachable
from test_faults import LEASE_S, S, _claims, _queue

from webplatform.config import Settings
from webplatform.platform import Platform

# What the worker logs when a run ends while the database cannot be reached.
UNRECORDED = "ended succeeded, but the database cannot be reached"
# Long enough that the cut lands while the tool runs, even on a loaded machine.
RUN_S = 6.0
pytestmark = [pytest.mark.integration, pytest.mark.postgresql, pytest.mark.slow]


class Link:
    """A TCP forwarder from 127.0.0.1:`port` to `to` that can be cut and opened again."""

    def __init__(self, port: int, to: tuple[str, int]) -> None:
        self.port, self.to = port, to
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.listener: socket.socket | None = None

    def open(self) -> None:
        """Listen again: new connections are forwarded."""
        listener = socket.create_server(("127.0.0.1", self.port))
        with self.lock:
            self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                upstream = socket.create_connection(self.to)
                with self.lock:
                    if self.listener is not listener:  # cut meanwhile
                        client.close()
                        upstream.close()
                        continue
                    self.sockets += [client, upstream]
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def cut(self) -> None:
        """Close every forwarded connection and refuse new ones, as a dropped link does."""
        with self.lock:
            if self.listener is not None:
                self.listener.close()
                self.listener = None
            cut, self.sockets = self.sockets, []
        for sock in cut:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@contextlib.contextmanager
def link_to(settings: Settings) -> Iterator[tuple[Link, str]]:
    """An open `Link` to the test's PostgreSQL, and the database URL that goes through it."""
    port = free_port()
    url, real = _unreachable(settings, port)
    link = Link(port, real)
    link.open()
    try:
        yield link, url
    finally:
        link.cut()


def test_a_run_that_ends_while_cut_off_is_recorded_once_the_link_is_back(
    pg_settings: Settings, procs: Procs
) -> None:
    settings = pg_settings
    platform = Platform(settings)
    env = aat_env(settings, worker_lease_s=LEASE_S, heartbeat_s=0.3)
    with link_to(settings) as (link, url):
        procs.start("worker", ["worker"], env | {"AAT_DB_URL": url})
        first = _queue(platform, approved=True, subject="first", **{"delay-s": RUN_S})
        wait_for(lambda: f"job {first}: running" in procs.log("worker"), 60, "the tool to start")
        link.cut()
        assert not outbox_files(settings), "the link was cut after the tool had finished"
        # The tool finishes while its worker cannot reach the database, which it says.
        wait_for(lambda: UNRECORDED in procs.log("worker"), 60, "the run to end while cut off")
        assert state_of(platform.engine, first) == S.running
        assert len(outbox_files(settings)) == 1
        link.open()
        wait_for(lambda: state_of(platform.engine, first) == S.succeeded, 60, "the outcome")

        second = _queue(platform, approved=True, subject="second")
        wait_for(lambda: state_of(platform.engine, second) == S.succeeded, 60, "the next run")
    assert _claims(platform, first) == 1 and _claims(platform, second) == 1
    assert len(outbox_files(settings)) == 2
    log = procs.log("worker")
    assert log.count(UNRECORDED) == 1 and "Traceback" not in log, log
    platform.engine.dispose()


def test_a_job_reaped_while_its_worker_is_cut_off_stays_lost_and_never_reruns(
    pg_settings: Settings, procs: Procs
) -> None:
    settings = pg_settings
    platform = Platform(settings)
    env = aat_env(settings, worker_lease_s=LEASE_S, heartbeat_s=0.3)
    with link_to(settings) as (link, url):
        procs.start("cut-off", ["worker"], env | {"AAT_DB_URL": url})
        first = _queue(platform, approved=True, subject="first", **{"delay-s": RUN_S})
        wait_for(lambda: f"job {first}: running" in procs.log("cut-off"), 60, "the tool to start")
        link.cut()
        assert not outbox_files(settings), "the link was cut after the tool had finished"
        # Another worker, on a link of its own, reaps the lease the cut-off one cannot renew.
        procs.start("other", ["worker"], env)
        wait_for(lambda: state_of(platform.engine, first) == S.lost, 60, "the job to be lost")
        wait_for(lambda: outbox_files(settings), 30, "the tool to send its message")
        link.open()
        wait_for(lambda: "result dropped" in procs.log("cut-off"), 60, "the late outcome refused")
        second = _queue(platform, approved=True, subject="second")
        wait_for(lambda: state_of(platform.engine, second) == S.succeeded, 60, "the next run")
    assert state_of(platform.engine, first) == S.lost
    assert _claims(platform, first) == 1 and _claims(platform, second) == 1
    assert len(outbox_files(settings)) == 2
    platform.engine.dispose()
