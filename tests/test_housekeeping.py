"""Housekeeping: one pass heartbeats, expires, reaps, and prunes sessions and heartbeats; the
running housekeeper meets each deadline on time and sleeps while nothing is due.

The running tests give the housekeeper an hour between heartbeats, so only the deadline
itself (or the job move that set it) can have woken it in time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import SecretStr
from seal_helpers import fresh_seal
from sqlalchemy import Engine
from sqlmodel import Session, select

from webplatform.canonical import args_digest
from webplatform.config import Settings
from webplatform.housekeeping import STALE_HEARTBEAT_S, Housekeeper
from webplatform.jobs import calls, leases
from webplatform.jobs.tracking import _dashboard_alive
from webplatform.platform import Platform
from webplatform.store import (
    Heartbeat,
    Job,
    JobState,
    OperatorSession,
    Surface,
    session_scope,
    transact,
    utcnow,
)
from webplatform.store.heartbeats import beat
from webplatform.store.notify import StopEvent
from webplatform.store.operators import add_operator
from webplatform.store.sessions import start_session
from webplatform.trust.permissions import ROLE_BOOK

S = JobState
ARGS = {"to": "ops@example.org", "subject": "hi", "body": "hello"}
# How late a deadline may be met: seconds, with room for a loaded CI machine (it took over 2 s).
# These housekeepers beat once an hour, so only the deadline itself can wake them in time.
ON_TIME_S = 8.0


def _sessions(engine: Engine) -> list[str]:
    with session_scope(engine, write=False) as session:
        return [s.operator for s in session.exec(select(OperatorSession)).all()]


def _heartbeats(engine: Engine) -> list[str]:
    with session_scope(engine, write=False) as session:
        return sorted(h.id for h in session.exec(select(Heartbeat)).all())


def _seen_at(engine: Engine, process_id: str) -> datetime | None:
    with session_scope(engine, write=False) as session:
        row = session.get(Heartbeat, process_id)
        return None if row is None else row.seen_at


def _call(irreversible: bool = True) -> calls.Call:
    return calls.Call(
        kind="tool",
        name="outbox",
        action="send-message",
        args=ARGS,
        digest=args_digest(kind="tool", name="outbox", action="send-message", args=ARGS),
        irreversible=irreversible,
        surface=Surface.mcp_stdio,
    )


def _pending(engine: Engine, ttl_s: float) -> int:
    job = transact(
        engine,
        lambda s: calls.create_job(session=s, call=_call(), start=calls.Waiting(ttl_s=ttl_s)),
    )
    return job.id or 0


def _running(engine: Engine, lease_s: float) -> int:
    start = calls.Running(worker_id="doomed", lease_s=lease_s)
    job = transact(engine, lambda s: calls.create_job(session=s, call=_call(False), start=start))
    return job.id or 0


def _job(engine: Engine, job_id: int) -> Job:
    with session_scope(engine, write=False) as session:
        job = session.get(Job, job_id)
    assert job is not None
    return job


def _wait_for(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
    return found


def _ended(engine: Engine, job_id: int, state: JobState) -> Job:
    return _wait_for(lambda: (j := _job(engine, job_id)).state == state and j)


class CountingHousekeeper(Housekeeper):
    """A housekeeper that counts its passes (each one is a wake-up of its thread)."""

    passes = 0

    def run_due(self) -> float:
        self.passes += 1
        return super().run_due()


@contextmanager
def housekeeping(
    engine: Engine, settings: Settings, **changes: Any
) -> Iterator[CountingHousekeeper]:
    """A running housekeeper (process "dash-1"), asleep after its first pass; stopping it
    must take a moment, however far its next deadline."""
    also = changes.pop("also_beats_for", ())
    keeper = CountingHousekeeper(
        platform=Platform(settings, engine=engine),
        settings=settings.model_copy(update={"heartbeat_s": 3600.0, **changes}),
        process_id="dash-1",
        role="dashboard",
        also_beats_for=also,
    )
    stop = StopEvent()
    thread = threading.Thread(target=keeper.run_forever, args=(stop,), daemon=True)
    thread.start()
    try:
        _wait_for(lambda: keeper.passes and "dash-1" in _heartbeats(engine))
        time.sleep(0.2)  # asleep now
        yield keeper
    finally:
        stopping = time.monotonic()
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert time.monotonic() - stopping < 2, "the sleeping housekeeper did not stop at once"


def test_one_pass_removes_expired_sessions_and_stale_heartbeats(
    engine: Engine, settings: Settings
) -> None:
    seal = fresh_seal()

    def setup(session: Session) -> None:
        add_operator(
            session=session, name="ada", password="long enough", seal=seal, roles=ROLE_BOOK
        )
        add_operator(
            session=session, name="bob", password="long enough", seal=seal, roles=ROLE_BOOK
        )
        start_session(session=session, operator="ada", ttl_s=-1, seal=seal)  # expired already
        start_session(session=session, operator="bob", ttl_s=3600, seal=seal)
        long_ago = utcnow() - timedelta(seconds=STALE_HEARTBEAT_S + 60)
        beat(session=session, process_id="gone", role="worker", host="h", pid=1, now=long_ago)
        beat(session=session, process_id="alive", role="worker", host="h", pid=2)

    transact(engine, setup)
    assert sorted(_sessions(engine)) == ["ada", "bob"]

    chores = Housekeeper(
        platform=Platform(settings, engine=engine),
        settings=settings,
        process_id="dash-1",
        role="dashboard",
    ).run_once()

    assert _sessions(engine) == ["bob"], "the expired session row is still there"
    assert _heartbeats(engine) == ["alive", "dash-1"], "the stale heartbeat is still there"
    assert (chores.sessions_pruned, chores.heartbeats_pruned) == (1, 1)


def test_an_approval_asked_while_it_sleeps_expires_on_time(
    engine: Engine, settings: Settings
) -> None:
    with housekeeping(engine, settings):
        job_id = _pending(engine, ttl_s=0.5)
        expired = _ended(engine, job_id, S.expired)
    assert expired.finished_at is not None and expired.expires_at is not None
    late = (expired.finished_at - expired.expires_at).total_seconds()
    assert 0 <= late < ON_TIME_S, f"expired {late:.2f} s after its window closed"


# Run in another process: the new job reaches the housekeeper only through the database
# (SQLite's marker file, PostgreSQL's NOTIFY).
_ASK_ELSEWHERE = """
import sys
from pathlib import Path
from webplatform.jobs import calls
from webplatform.canonical import args_digest
from webplatform.config import Settings
from webplatform.store import Surface, make_engine, transact
args = {args!r}
settings = Settings(home=Path(sys.argv[1]), db_url=sys.argv[2])
call = calls.Call(kind="tool", name="outbox", action="send-message", args=args,
    digest=args_digest(kind="tool", name="outbox", action="send-message", args=args),
    irreversible=True, surface=Surface.mcp_stdio)
transact(make_engine(settings),
    lambda s: calls.create_job(session=s, call=call, start=calls.Waiting(ttl_s=0.5)))
"""


def test_an_approval_asked_by_another_process_expires_on_time(
    engine: Engine, settings: Settings
) -> None:
    with housekeeping(engine, settings) as keeper:
        passes = keeper.passes
        subprocess.run(
            [
                sys.executable,
                "-c",
                _ASK_ELSEWHERE.format(args=ARGS),
                str(settings.home),
                settings.db_url.get_secret_value(),
            ],
            check=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("AAT_")},
        )
        expired = _wait_for(lambda: [j for j in _jobs(engine) if j.state == S.expired], timeout=10)[
            0
        ]
        assert keeper.passes > passes
    late = (expired.finished_at - expired.expires_at).total_seconds()
    assert 0 <= late < ON_TIME_S, f"expired {late:.2f} s after its window closed"


def _jobs(engine: Engine) -> list[Job]:
    with session_scope(engine, write=False) as session:
        return list(session.exec(select(Job)).all())


def test_a_job_is_lost_on_time_once_its_lease_stops_being_renewed(
    engine: Engine, settings: Settings
) -> None:
    lease_s = 0.4
    with housekeeping(engine, settings):
        job_id = _running(engine, lease_s=lease_s)
        # Renewed past three of its original leases: the housekeeper, woken at each old
        # end, finds it renewed and leaves it running.
        for _ in range(6):
            time.sleep(lease_s / 2)
            renew = lambda s: leases.renew_lease(  # noqa: E731
                session=s, job_id=job_id, worker_id="doomed", lease_s=lease_s
            )
            assert transact(engine, renew), "a live lease was taken"
        lost = _ended(engine, job_id, S.lost)
    assert lost.finished_at is not None and lost.lease_expires_at is not None
    late = (lost.finished_at - lost.lease_expires_at).total_seconds()
    assert 0 <= late < ON_TIME_S, f"lost {late:.2f} s after its lease ended"


def test_heartbeats_stay_fresh_for_the_no_dashboard_warning(
    engine: Engine, settings: Settings
) -> None:
    beat_s = 0.2
    with housekeeping(
        engine, settings, heartbeat_s=beat_s, also_beats_for=[("worker-1", "worker")]
    ):
        assert _heartbeats(engine) == ["dash-1", "worker-1"]
        ages = []
        for _ in range(50):  # 2.5 s and more: a heartbeat that stopped would be that old
            seen = _seen_at(engine, "dash-1")
            assert seen is not None
            ages.append((utcnow() - seen).total_seconds())
            with session_scope(engine, write=False) as session:
                assert _dashboard_alive(
                    session, settings.model_copy(update={"heartbeat_s": beat_s})
                )
            time.sleep(0.05)
        assert _seen_at(engine, "worker-1") is not None
    # A margin for a loaded machine (a pass may be late), well under the test's 2.5 s.
    assert max(ages) < beat_s + 1.2, f"a heartbeat {max(ages):.2f} s old (beats every {beat_s})"
    assert _heartbeats(engine) == [], "a stopped housekeeper leaves its heartbeats"


def test_an_idle_housekeeper_sleeps_through_writes_that_move_no_job(
    engine: Engine, settings: Settings
) -> None:
    """Heartbeats of other processes are commits too, but no deadline can come of them."""
    other = Housekeeper(
        platform=Platform(settings, engine=engine),
        settings=settings,
        process_id="dash-2",
        role="dashboard",
    )
    with housekeeping(engine, settings) as keeper:
        passes = keeper.passes
        for _ in range(10):
            other.beat()
            time.sleep(0.05)
        time.sleep(0.5)
        assert keeper.passes == passes, f"{keeper.passes - passes} wake-up(s) with nothing due"


class Sink:
    """A local HTTP endpoint for Apprise's `json://`: the notices' titles, as they arrive."""

    def __init__(self) -> None:
        self.titles: list[str] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                sink.titles.append(body["title"])
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_a_new_pending_job_is_announced_at_once_and_reminded_on_time(
    engine: Engine, settings: Settings
) -> None:
    sink = Sink()
    try:
        with housekeeping(engine, settings, notify=SecretStr(sink.url)):
            asked = time.monotonic()
            _pending(engine, ttl_s=1.0)  # a reminder is due 0.8 s in
            _wait_for(lambda: sink.titles)
            announced = time.monotonic() - asked
            _wait_for(lambda: len(sink.titles) == 2)
            reminded = time.monotonic() - asked
    finally:
        sink.server.shutdown()
    assert sink.titles[0].startswith("Approval needed")
    assert sink.titles[1].startswith("Reminder")
    assert announced < ON_TIME_S, f"announced {announced:.2f} s after the call"
    assert 0.8 <= reminded < 0.8 + ON_TIME_S, f"reminded {reminded:.2f} s after the call"
