"""LISTEN/NOTIFY wake-ups: on PostgreSQL a move wakes an idle worker at once; elsewhere, polling."""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from webplatform import calls, jobs, runner, signing
from webplatform.canonical import args_digest
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.registry import RegistryLoader, resolve_secrets
from webplatform.store import JobState, Surface, make_engine, session_scope, transact
from webplatform.store.notify import JobNotifications
from webplatform.worker import Worker

SEND = {"to": "ops@example.org", "subject": "wake up", "body": "hi"}


def _pending(session: Session) -> int:
    call = calls.Call(
        kind="tool",
        name="outbox",
        action="send-message",
        args=SEND,
        digest=args_digest(kind="tool", name="outbox", action="send-message", args=SEND),
        irreversible=True,
        surface=Surface.mcp_stdio,
    )
    job = calls.create_job(session=session, call=call, start=calls.Waiting())
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
        assert wakeups.listening == (backend == "postgresql")
        rolled_back = Session(engine)
        _pending(rolled_back)
        rolled_back.rollback()
        rolled_back.close()
        started = time.monotonic()
        assert wakeups.wait(0.5, stop) is False
        assert time.monotonic() - started >= 0.4
        job_id = transact(engine, _pending)
        _approve(engine, job_id, settings)
        assert wakeups.wait(5 if wakeups.listening else 0.2, stop) is wakeups.listening
    finally:
        wakeups.close()


def test_an_idle_worker_on_postgresql_runs_an_approval_at_once(pg_settings: Settings) -> None:
    engine = make_engine(pg_settings)
    worker = Worker(
        engine=engine,
        settings=pg_settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        resolve_secrets=resolve_secrets,
    )
    stop = threading.Event()
    # Polling alone would look again only after 30 s: only the NOTIFY can wake it sooner.
    thread = threading.Thread(
        target=worker.run_forever, args=(stop,), kwargs={"poll_s": 30, "listen_poll_s": 30}
    )
    job_id = transact(engine, _pending)
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
