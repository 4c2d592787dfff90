"""Wake-ups on job moves: PostgreSQL's NOTIFY and SQLite's own files wake an idle worker at once."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from descriptors import no_new_descriptors
from sqlalchemy import Engine
from sqlmodel import Session
from workspaces import aat_home_beside

from webplatform import inotify
from webplatform.canonical import args_digest
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import calls
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.process import runner
from webplatform.registry import RegistryLoader
from webplatform.store import JobState, Surface, make_engine, session_scope, transact
from webplatform.store.notify import JobNotifications, StopEvent
from webplatform.trust import signing
from webplatform.worker import Worker

SEND = {"to": "ops@example.org", "subject": "wake up", "body": "hi"}


def _pending(session: Session, settings: Settings | None = None) -> int:
    """A waiting call; with `settings`, its policy signed with that home's key (approvable)."""
    seal = signing.signer_for(settings.home).row_seal() if settings is not None else None
    call = calls.Call(
        kind="tool",
        name="outbox",
        action="send-message",
        args=SEND,
        digest=args_digest(kind="tool", name="outbox", action="send-message", args=SEND),
        irreversible=True,
        surface=Surface.mcp_stdio,
    )
    job = calls.create_job(session=session, call=call, start=calls.Waiting(seal=seal))
    return job.id or 0


def _approve(engine: Engine, job_id: int, settings: Settings) -> None:
    signer = signing.signer_for(settings.home)
    digest = args_digest(kind="tool", name="outbox", action="send-message", args=SEND)
    transact(
        engine,
        lambda s: jobs.approve(
            signer=signer, session=s, job_id=job_id, operator="olga", digest=digest
        ),
    )


def test_a_committed_move_wakes_a_listener_and_a_rolled_back_one_does_not(
    engine: Engine, backend: str, settings: Settings
) -> None:
    wakeups = JobNotifications(engine)
    stop = threading.Event()
    try:
        assert wakeups.listening  # NOTIFY on PostgreSQL, the database file on SQLite
        rolled_back = Session(engine)
        _pending(rolled_back)
        rolled_back.rollback()
        rolled_back.close()
        started = time.monotonic()
        assert wakeups.wait(0.5, stop) is False
        assert time.monotonic() - started >= 0.4
        job_id = transact(engine, lambda s: _pending(s, settings))
        approver = threading.Timer(0.2, _approve, args=(engine, job_id, settings))
        approver.start()  # while the listener waits
        try:
            assert wakeups.wait(30, stop) is True
        finally:
            approver.join()
    finally:
        wakeups.close()


def test_a_move_while_nobody_waits_ends_the_next_wait_at_once(engine: Engine, backend: str) -> None:
    """A worker looks for work, then waits: a move committed between the two is not lost."""
    wakeups = JobNotifications(engine)
    try:
        assert wakeups.listening
        transact(engine, _pending)
        time.sleep(0.3)  # every signal of that move has arrived: none comes during the wait
        started = time.monotonic()
        assert wakeups.wait(2, threading.Event()) is True
        assert time.monotonic() - started < 1
    finally:
        wakeups.close()


def test_a_stop_event_ends_a_wait_at_once(engine: Engine, backend: str) -> None:
    """A LISTEN wait too: stopping `aat serve` does not wait out a housekeeper's long sleep."""
    wakeups = JobNotifications(engine)
    stop = StopEvent()
    try:
        assert wakeups.listening
        threading.Timer(0.2, stop.set).start()
        started = time.monotonic()
        assert wakeups.wait(30, stop) is False
        assert time.monotonic() - started < 2
    finally:
        wakeups.close()


def test_an_idle_worker_on_postgresql_runs_an_approval_at_once(pg_settings: Settings) -> None:
    engine = make_engine(pg_settings)
    worker = Worker(
        platform=Platform(pg_settings, engine=engine),
        settings=pg_settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
    )
    stop = threading.Event()
    # Polling alone would look again only after 30 s: only the NOTIFY can wake it sooner.
    thread = threading.Thread(
        target=worker.run_forever, args=(stop,), kwargs={"poll_s": 30, "listen_poll_s": 30}
    )
    job_id = transact(engine, lambda s: _pending(s, pg_settings))
    thread.start()
    try:
        time.sleep(1.0)  # idle and waiting by now
        approved_at = time.monotonic()
        _approve(engine, job_id, pg_settings)
        state: Any = None
        while time.monotonic() - approved_at < 10:
            with session_scope(engine, write=False) as session:
                state = jobs.get_job(session=session, job_id=job_id).state  # type: ignore[union-attr]
            if state == JobState.succeeded:
                break
            time.sleep(0.05)
        assert state == JobState.succeeded
        assert time.monotonic() - approved_at < 10
    finally:
        stop.set()
        # The stop event does not interrupt a LISTEN wait; one more move does.
        transact(engine, _pending)
        thread.join(timeout=40)
        engine.dispose()
    assert not thread.is_alive()


# Run in another process: the approval reaches the worker only through the database file.
_APPROVE_ELSEWHERE = """
import sys
from pathlib import Path
from webplatform.jobs import states as jobs
from webplatform.trust import signing
from webplatform.canonical import args_digest
from webplatform.config import Settings
from webplatform.store import make_engine, transact
settings = Settings(home=Path(sys.argv[1]), registry=sys.argv[2])
engine = make_engine(settings)
digest = args_digest(kind="tool", name="outbox", action="send-message", args={send!r})
transact(engine, lambda s: jobs.approve(
    signer=signing.signer_for(settings.home), session=s, job_id=int(sys.argv[3]),
    operator="olga", digest=digest))
"""


def test_an_idle_worker_on_sqlite_is_woken_by_another_process_committing(
    tmp_path: Path,
) -> None:
    """The approval is committed by another process, and the worker would only poll again
    after an hour: it runs the job because the commit to the database file woke it."""
    settings = Settings(home=aat_home_beside(tmp_path), workspaces=str(tmp_path))
    engine = make_engine(settings)
    # Only the file can wake it: an hour between looks, and no housekeeping of its own.
    worker = Worker(
        platform=Platform(settings, engine=engine),
        settings=settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        housekeeping=False,
    )
    job_id = transact(engine, lambda s: _pending(s, settings))
    signing.signer_for(settings.home)  # the key exists before either side reads it
    stop = StopEvent()
    thread = threading.Thread(
        target=worker.run_forever, args=(stop,), kwargs={"poll_s": 3600, "listen_poll_s": 3600}
    )
    thread.start()
    try:
        wait_for(lambda: _state(engine, job_id) == JobState.pending_approval)
        time.sleep(0.5)  # the worker has looked once and sleeps now
        script = _APPROVE_ELSEWHERE.format(send=SEND)
        subprocess.run(
            [sys.executable, "-c", script, str(settings.home), settings.registry, str(job_id)],
            check=True,
            env={k: v for k, v in os.environ.items() if k != "AAT_DB_URL"},
        )
        wait_for(lambda: _state(engine, job_id) == JobState.succeeded)
    finally:
        stop.set()  # wakes the sleeping worker too
        thread.join(timeout=30)
        engine.dispose()
    assert not thread.is_alive()


def _state(engine: Engine, job_id: int) -> JobState | None:
    with session_scope(engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
    return None if job is None else JobState(job.state)


def wait_for(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_without_inotify_the_worker_polls_after_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kernel refuses an inotify instance (its limit reached): the database is not
    watched, waiters poll, the worker's every idle look does not log it again, and the watch
    starts once the kernel allows it."""
    settings = Settings(home=aat_home_beside(tmp_path), workspaces=str(tmp_path))
    engine = make_engine(settings)
    inotify.supported()  # looked up once, before descriptors run out
    try:
        with caplog.at_level(logging.WARNING), no_new_descriptors():
            looks = [JobNotifications(engine).listening for _ in range(5)]
        assert looks == [False] * 5
        # Once the kernel allows it again, the next look watches the file.
        later = JobNotifications(engine)
        assert later.listening is True
        later.close()
    finally:
        engine.dispose()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "polling instead" in warnings[0] and "\n" not in warnings[0]


def _watching_threads() -> int:
    return sum(t.name == "aat-db-watch" and t.is_alive() for t in threading.enumerate())


def test_the_database_watch_ends_with_its_last_listener(tmp_path: Path) -> None:
    """Listeners of one database file share one watching thread (one inotify instance), and
    the last one's close ends it: a process that opens and closes workers keeps none."""
    settings = Settings(home=aat_home_beside(tmp_path), workspaces=str(tmp_path))
    engine = make_engine(settings)
    before = _watching_threads()
    try:
        first, second = JobNotifications(engine), JobNotifications(engine)
        assert first.listening and second.listening
        assert _watching_threads() == before + 1
        first.close()
        assert _watching_threads() == before + 1, "the other listener still needs it"
        second.close()
        assert _watching_threads() == before
        again = JobNotifications(engine)
        assert again.listening and _watching_threads() == before + 1
        again.close()
        assert _watching_threads() == before
    finally:
        engine.dispose()


def test_a_worker_without_duties_wakes_for_approvals_only(
    engine: Engine, backend: str, settings: Settings
) -> None:
    """`aat serve`'s worker: the calls the server records, cancels and finishes do not wake
    it (each would cost a claim transaction that finds nothing); an approval does, at once."""
    worker = Worker(
        platform=Platform(settings, engine=engine),
        settings=settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        housekeeping=False,
    )
    signing.signer_for(settings.home)
    passes: list[float] = []
    run_once = worker.run_once

    def counted() -> bool:
        passes.append(time.monotonic())
        return run_once()

    worker.run_once = counted  # type: ignore[method-assign]
    stop = StopEvent()
    thread = threading.Thread(
        target=worker.run_forever, args=(stop,), kwargs={"poll_s": 3600, "listen_poll_s": 3600}
    )
    thread.start()
    try:
        wait_for(lambda: passes)
        time.sleep(0.3)  # its first look is over: it sleeps now
        looked = len(passes)
        pending = [transact(engine, lambda s: _pending(s, settings)) for _ in range(4)]
        transact(
            engine, lambda s: jobs.cancel(session=s, job_id=pending[0], actor="olga", reason="x")
        )
        time.sleep(0.5)  # every signal of those moves has arrived
        assert len(passes) == looked, "moves into other states woke it"
        _approve(engine, pending[1], settings)
        wait_for(lambda: _state(engine, pending[1]) == JobState.succeeded, timeout=30)
        assert len(passes) > looked
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
