"""A worker cut off from PostgreSQL while its job runs (SPEC §24): the outcome is honest and
nothing runs twice.

The worker reaches PostgreSQL only through a real TCP forwarder, which the test cuts (every
connection closed, new ones refused) while the job's tool runs, and opens again later. Cut
for less time than anyone waits, the run's outcome is recorded once the link is back; cut
while another worker reaps the lease, the job stays `lost` and its late outcome is refused.
Either way the worker reconnects by itself and runs the next job.

A link that silently drops every packet instead (a black hole: `blackhole.py`, nothing closed
or refused) fails the worker's statements within libpq's `tcp_user_timeout`, its idle
connections (LISTEN's too) within its keepalives, rather than hanging them for the kernel's
15 minutes of retransmissions; once packets pass again the outcome is recorded and a new
LISTEN connection replaces the dead one. Either kind of outage is said once in the worker's
log, not on every renewal tick.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from blackhole import black_hole
from proc_helpers import AAT, Procs, _die_with_parent, aat_env, outbox_files, state_of, wait_for
from serving import free_port
from sqlalchemy import make_url, text
from test_database_down import _pipe, _unreachable
from test_faults import LEASE_S, S, _claims, _queue

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store.notify import CHANNEL_SQL

# What the worker logs when a run ends while the database cannot be reached.
UNRECORDED = "ended succeeded, but the database cannot be reached"
# What the worker logs when a renewal of its lease fails, and when one works again.
RENEWAL_FAILED = "lease renewal failed"
RENEWED_AGAIN = "lease renewed again"
# Long enough that the cut lands while the tool runs, even on a loaded machine.
RUN_S = 6.0
# The most a black-holed worker may take to notice: aat's `tcp_user_timeout` (15 s) and the
# time to its next renewal, with room for a loaded machine; TCP alone would take 15 minutes.
NOTICE_S = 45.0
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
    # Renewals failed on every tick of the cut; the worker said so once.
    assert log.count(RENEWAL_FAILED) == 1, log
    platform.engine.dispose()


def _lease_overdue(platform: Platform, job_id: int) -> bool:
    """Whether the job's lease ran out by the database's clock (no renewal landed in time)."""
    with platform.engine.connect() as conn:
        query = "SELECT lease_expires_at < clock_timestamp() FROM job WHERE id = :id"
        return bool(conn.execute(text(query), {"id": job_id}).scalar_one())


def test_renewals_failing_for_a_while_are_said_once_and_their_end_once(
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
        wait_for(lambda: RENEWAL_FAILED in procs.log("worker"), 30, "a renewal to fail")
        # Renewals go on failing, four a lease, until the lease has run out unrenewed.
        wait_for(lambda: _lease_overdue(platform, first), 30, "the lease to run out")
        link.open()
        wait_for(lambda: RENEWED_AGAIN in procs.log("worker"), 30, "a renewal to work again")
        wait_for(lambda: state_of(platform.engine, first) == S.succeeded, 60, "the outcome")
    log = procs.log("worker")
    [failed] = [line for line in log.splitlines() if RENEWAL_FAILED in line]
    # With the reason the driver gave, in the same line.
    assert re.search(r"lease renewal failed \(OperationalError: \w.*\)$", failed), failed
    [again] = [line for line in log.splitlines() if RENEWED_AGAIN in line]
    assert "the database was away" in again, again
    assert _claims(platform, first) == 1 and len(outbox_files(settings)) == 1
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


def _listeners(platform: Platform) -> set[int]:
    """The server processes of the connections that LISTEN for this test's job moves."""
    with platform.engine.connect() as conn:
        channel = conn.execute(text(f"SELECT {CHANNEL_SQL}")).scalar_one()
        query = "SELECT pid FROM pg_stat_activity WHERE query = :listen"
        return set(conn.execute(text(query), {"listen": f'LISTEN "{channel}"'}).scalars())


# Bounded by its own waits (each a few times what it takes); TCP alone would hang it 15 min.
@pytest.mark.timeout(300)
def test_a_worker_whose_link_drops_every_packet_notices_records_once_and_listens_again(
    pg_settings: Settings, procs: Procs
) -> None:
    settings = pg_settings
    platform = Platform(settings)
    env = aat_env(settings, worker_lease_s=LEASE_S, heartbeat_s=0.3)
    _, real = _unreachable(settings, 0)
    with black_hole(real) as hole:
        url = make_url(_unreachable(settings, hole.port)[0]).set(host=hole.host)
        log = (procs.logs / "worker.log").open("ab")
        worker = subprocess.Popen(
            [*hole.enter(), *AAT, "worker"],
            env=env | {"AAT_DB_URL": url.render_as_string(hide_password=False)},
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        procs.started.append(worker)
        [listening] = wait_for(lambda: _listeners(platform), 60, "the worker to LISTEN")
        first = _queue(platform, approved=True, subject="first", **{"delay-s": RUN_S})
        wait_for(lambda: f"job {first}: running" in procs.log("worker"), 60, "the tool to start")
        hole.black()
        blacked = time.monotonic()
        wait_for(lambda: RENEWAL_FAILED in procs.log("worker"), NOTICE_S, "the worker to notice")
        noticed_s = time.monotonic() - blacked
        # The tool ends while nothing gets through; its outcome waits in the worker.
        wait_for(lambda: UNRECORDED in procs.log("worker"), 60, "the run to end unrecorded")
        # Every connection the worker held (its pool's, its LISTEN's) is given up by its own
        # kernel, which no longer waits for an answer that cannot come.
        wait_for(lambda: hole.links() == 0, NOTICE_S, "the worker's connections to be dropped")
        dropped_s = time.monotonic() - blacked
        assert state_of(platform.engine, first) == S.running
        assert len(outbox_files(settings)) == 1
        hole.mend()
        wait_for(lambda: state_of(platform.engine, first) == S.succeeded, 60, "the outcome")
        wait_for(lambda: _listeners(platform) - {listening}, 60, "a new LISTEN connection")
        second = _queue(platform, approved=True, subject="second")
        wait_for(lambda: state_of(platform.engine, second) == S.succeeded, 60, "the next run")
    print(
        f"black hole: noticed after {noticed_s:.1f} s, every link dropped after {dropped_s:.1f} s"
    )
    assert _claims(platform, first) == 1 and _claims(platform, second) == 1
    assert len(outbox_files(settings)) == 2
    said = procs.log("worker")
    assert said.count(RENEWAL_FAILED) == 1 and said.count(UNRECORDED) == 1, said
    assert "listening for job moves again" in said and "Traceback" not in said, said
    platform.engine.dispose()
