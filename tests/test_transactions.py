"""The one transaction door: a write waits out a held SQLite write lock instead of failing."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError
from stepup_helpers import job_step_up

from webplatform.config import Settings
from webplatform.jobs import decisions
from webplatform.jobs import states as jobs
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store import engine as engine_module
from webplatform.store import session_scope
from webplatform.store.models import JobState, Surface

HOLD_S = 1.0


def _hold_write_lock(db: Path, held: threading.Event, seconds: float) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        held.set()
        time.sleep(seconds)
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_approve_succeeds_once_a_held_write_lock_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's own wait (busy_timeout) is made shorter than the hold, so only the door's
    # retry can carry the approval through.
    monkeypatch.setattr(engine_module, "BUSY_TIMEOUT_MS", 100)
    settings = Settings(home=tmp_path / "aat-home")
    platform = Platform(settings)
    answer = request_run(
        platform=platform,
        call=RunCall(
            kind="tool",
            name="outbox",
            action="send-message",
            args={"to": "ops@example.org", "subject": "report", "body": "hello"},
        ),
        actor=Actor(surface=Surface.mcp_stdio, client="test-agent"),
        consent=Consent.QUEUE,
    )
    assert answer.job is not None
    job_id = answer.job
    pending = platform.transact(lambda s: jobs.get_job(session=s, job_id=job_id), write=False)
    assert pending is not None

    held = threading.Event()
    holder = threading.Thread(
        target=_hold_write_lock, args=(settings.home / "aat.db", held, HOLD_S)
    )
    holder.start()
    try:
        assert held.wait(5)
        # The lock is real: a write that does not go through the door fails outright.
        with (
            pytest.raises(OperationalError, match="locked"),
            session_scope(platform.engine) as session,
        ):
            session.connection()  # BEGIN IMMEDIATE
        started = time.monotonic()
        job = decisions.approve(
            platform=platform,
            job_id=job_id,
            operator="ada",
            digest=pending.args_digest,
            address="127.0.0.1",
            step_up=job_step_up(platform, job_id, "ada"),
        )
        waited = time.monotonic() - started
    finally:
        holder.join()
    assert job.state == JobState.approved
    assert waited >= HOLD_S * 0.5, "approve did not wait for the lock at all"
