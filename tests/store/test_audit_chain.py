"""The hash-chained audit trail, checked with the real `aat audit verify|export` processes.

Each tamper (an edit, a deletion, a reorder, an insertion) is done with plain SQL on the
test's database, as someone with the database file or credentials could; verification must
exit 1 and name the first event that breaks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text, update
from sqlmodel import col

from webplatform.canonical import args_digest
from webplatform.config import Settings
from webplatform.jobs import calls, leases
from webplatform.jobs import states as jobs
from webplatform.store import Job, JobState, Surface, session_scope, transact, utcnow
from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.audit_chain import verify_chain

pytestmark = pytest.mark.integration  # runs the aat command line

S = JobState
AAT = [sys.executable, "-m", "webplatform"]


def _aat(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
    env["AAT_HOME"] = str(settings.home)
    if settings.db_url:
        env["AAT_DB_URL"] = settings.db_url.get_secret_value()
    return subprocess.run(
        [*AAT, "audit", *args], env=env, capture_output=True, text=True, timeout=60
    )


def _finished_job(engine: Engine, n: int) -> int:
    args = {"name": f"n{n}"}

    def go(session: Any) -> int:
        call = calls.Call(
            kind="tool",
            name="hello-world",
            action="greet",
            args=args,
            digest=args_digest(kind="tool", name="hello-world", action="greet", args=args),
            irreversible=False,
            surface=Surface.cli,
        )
        job = calls.create_job(
            session=session, call=call, start=calls.Running(worker_id="w", lease_s=60)
        )
        leases.finish(
            session=session, job_id=job.id or 0, worker_id="w", ending=leases.Ending(S.succeeded)
        )
        return job.id or 0

    return transact(engine, go)


def _trail(engine: Engine, jobs_made: int = 3) -> list[int]:
    for n in range(jobs_made):
        _finished_job(engine, n)
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(text("SELECT id FROM audit_event ORDER BY id"))]


def _sql(engine: Engine, statement: str, **params: Any) -> None:
    with engine.begin() as conn:
        conn.execute(text(statement), params)


def _broken(settings: Settings, event_id: int, word: str) -> None:
    done = _aat(settings, "verify")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"audit event {event_id} " in done.stderr and word in done.stderr, done.stderr


def test_an_intact_trail_verifies_and_exports_with_hashes(
    engine: Engine, settings: Settings
) -> None:
    ids = _trail(engine)
    done = _aat(settings, "verify")
    assert done.returncode == 0, done.stderr
    assert f"{len(ids)} events checked" in done.stdout
    exported = _aat(settings, "export")
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [e["id"] for e in lines] == ids
    assert lines[0]["prev_hash"] == "0" * 64
    assert all(b["prev_hash"] == a["hash"] for a, b in zip(lines, lines[1:], strict=False))
    future = (utcnow() + timedelta(days=1)).isoformat()
    assert _aat(settings, "export", "--since", future).stdout == ""
    bad = _aat(settings, "export", "--since", "last tuesday")
    assert bad.returncode == 2 and "--since" in bad.stderr and "ISO" in bad.stderr


def test_an_edited_event_is_named(engine: Engine, settings: Settings) -> None:
    ids = _trail(engine)
    _sql(engine, "UPDATE audit_event SET actor = 'nobody' WHERE id = :id", id=ids[2])
    _broken(settings, ids[2], "edited")


def test_a_deleted_event_is_found_at_the_next_one(engine: Engine, settings: Settings) -> None:
    ids = _trail(engine)
    _sql(engine, "DELETE FROM audit_event WHERE id = :id", id=ids[2])
    _broken(settings, ids[3], "deleted")


def test_reordered_events_are_found(engine: Engine, settings: Settings) -> None:
    ids = _trail(engine)
    a, b = ids[1], ids[2]
    _sql(engine, "UPDATE audit_event SET id = -1 WHERE id = :a", a=a)
    _sql(engine, "UPDATE audit_event SET id = :a WHERE id = :b", a=a, b=b)
    _sql(engine, "UPDATE audit_event SET id = :b WHERE id = -1", b=b)
    _broken(settings, a, "does not follow")


def test_an_inserted_event_is_found(engine: Engine, settings: Settings) -> None:
    ids = _trail(engine)
    # Copies the links of the event before it, as a careless forger would.
    _sql(
        engine,
        "INSERT INTO audit_event (id, at, actor, event, prev_hash, event_hash) "
        "SELECT :new, at, 'olga', 'approved', prev_hash, event_hash FROM audit_event "
        "WHERE id = :last",
        new=ids[-1] + 10,
        last=ids[-1],
    )
    _broken(settings, ids[-1] + 10, "does not follow")


def test_retention_keeps_the_chain_verifiable(engine: Engine, settings: Settings) -> None:
    made = [_finished_job(engine, n) for n in range(6)]
    with session_scope(engine) as session:
        record_event(session, AuditEntry(actor="olga", event="login"))  # survives retention
    past = utcnow() - timedelta(days=90)
    old = made[1:4]
    with session_scope(engine) as session:
        session.exec(
            update(Job)
            .where(col(Job.id).in_(old))
            .values(updated_at=past)
            .execution_options(synchronize_session=False)
        )
    pruned = transact(
        engine, lambda s: jobs.prune_finished(session=s, older_than=utcnow() - timedelta(days=30))
    )
    assert pruned == 3
    done = _aat(settings, "verify")
    assert done.returncode == 0, done.stderr
    with engine.connect() as conn:
        events = conn.execute(text("SELECT id, event, detail FROM audit_event ORDER BY id")).all()
    assert events[-1][1] == "pruned" and json.loads(events[-1][2])["jobs"] == 3
    # A deletion retention did not make is still caught.
    survivor = next(e[0] for e in events if e[1] == "login")
    _sql(engine, "DELETE FROM audit_event WHERE id = :id", id=survivor)
    done = _aat(settings, "verify")
    assert done.returncode == 1 and "deleted" in done.stderr, done.stderr


def test_concurrent_writers_never_fork_the_chain(engine: Engine) -> None:
    def write(n: int) -> None:
        for i in range(15):
            _finished_job(engine, n * 100 + i)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with session_scope(engine, write=False) as session:
        report = verify_chain(session=session)
    assert report.intact, report.problem
    assert report.checked == 4 * 15 * 2  # created and finished, for each job
