"""Retention: the worker's housekeeping removes old finished jobs, and only those.

Also: the history list never loads the heavy columns (arguments, result, output) it does
not show, checked on the SQL the dashboard's jobs page actually sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, update
from sqlmodel import Session, col, select

from dashboard.app import create_app
from webplatform import housekeeping
from webplatform.canonical import args_digest
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import calls, leases
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.registry import RegistryLoader
from webplatform.store import AuditEvent, Job, JobState, Surface, session_scope, transact
from webplatform.store.models import utcnow
from webplatform.trust.signing import DecisionSigner
from webplatform.worker import Worker

S = JobState
# Retention runs nothing, so nothing checks this key.
SIGNER = DecisionSigner(Ed25519PrivateKey.generate())
HEAVY = ("args_json", "result_json", "stdout", "stderr")


def _worker(engine: Engine, settings: Settings) -> Worker:
    def never_run(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("retention tests run nothing")

    return Worker(
        platform=Platform(settings, engine=engine),
        settings=settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=never_run,
        worker_id="housekeeper",
    )


def _new(session: Session, state: S, n: int = 0) -> int:
    args = {"to": "bob@example.org", "subject": f"m{n}", "body": "x" * 200}
    call = calls.Call(
        kind="tool",
        name="outbox",
        action="send-message",
        args=args,
        digest=args_digest(kind="tool", name="outbox", action="send-message", args=args),
        irreversible=state != S.running,
        surface=Surface.mcp_stdio,
        client="agent",
    )
    starts: dict[S, calls.Start] = {
        S.pending_approval: calls.Waiting(ttl_s=None),
        S.approved: calls.Approved(decided_by="olga", signer=SIGNER),
        S.running: calls.Running(worker_id="w", lease_s=3600),
    }
    job = calls.create_job(session=session, call=call, start=starts[state])
    assert job.id is not None
    return job.id


def _make(engine: Engine, state: S, n: int = 0) -> int:
    return transact(engine, lambda s: _new(s, state, n))


def _finish(engine: Engine, job_id: int, how: str) -> None:
    def go(session: Session) -> None:
        if how == "deny":
            jobs.deny(session=session, job_id=job_id, operator="olga", reason="no")
        elif how == "cancel":
            jobs.cancel(session=session, job_id=job_id, actor="olga")
        else:
            leases.finish(
                session=session, job_id=job_id, worker_id="w", ending=leases.Ending(S.succeeded)
            )

    transact(engine, go)


def _age(engine: Engine, ids: list[int], days: float) -> None:
    past = utcnow() - timedelta(days=days)
    with session_scope(engine) as session:
        session.exec(
            update(Job)
            .where(col(Job.id).in_(ids))
            .values(updated_at=past, created_at=past)
            .execution_options(synchronize_session=False)
        )


def _ids(engine: Engine) -> set[int]:
    with session_scope(engine, write=False) as session:
        return {i for i in session.exec(select(Job.id)).all() if i is not None}


def _events(engine: Engine, job_id: int) -> list[str]:
    with session_scope(engine, write=False) as session:
        stmt = select(AuditEvent.event).where(AuditEvent.job_id == job_id)
        return list(session.exec(stmt).all())


def test_housekeeping_removes_old_finished_jobs_and_keeps_live_ones_and_decisions(
    engine: Engine, settings: Settings
) -> None:
    live = [_make(engine, S.pending_approval), _make(engine, S.approved), _make(engine, S.running)]
    succeeded, denied, cancelled = (
        _make(engine, S.running),
        _make(engine, S.pending_approval),
        _make(engine, S.approved),
    )
    _finish(engine, succeeded, "finish")
    _finish(engine, denied, "deny")
    _finish(engine, cancelled, "cancel")
    recent = _make(engine, S.running)
    _finish(engine, recent, "finish")
    _age(engine, [*live, succeeded, denied, cancelled], days=31)

    _worker(engine, settings).housekeeper.run_once()

    assert _ids(engine) == {*live, recent}
    # The decisions outlive their jobs; the rest of a removed job's trail goes with it.
    assert _events(engine, denied) == ["denied"]
    assert _events(engine, cancelled) == ["approved", "cancelled"]
    assert _events(engine, succeeded) == []
    assert "created" in _events(engine, recent)


def test_retention_days_comes_from_the_environment(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AAT_RETENTION_DAYS", "7")
    week = Settings(home=settings.home, db_url=settings.db_url)
    assert week.retention_days == 7
    old, young = _make(engine, S.running, 1), _make(engine, S.running, 2)
    for job_id in (old, young):
        _finish(engine, job_id, "finish")
    _age(engine, [old], days=8)
    _age(engine, [young], days=6)
    assert _worker(engine, week).housekeeper.prune()[0] == 1
    assert _ids(engine) == {young}


def test_pruning_runs_at_start_then_at_most_every_few_minutes(
    engine: Engine, settings: Settings
) -> None:
    first = _make(engine, S.running)
    _finish(engine, first, "finish")
    _age(engine, [first], days=40)
    housekeeper = _worker(engine, settings).housekeeper
    assert housekeeper.prune_every_s >= 60
    housekeeper.run_once()
    assert first not in _ids(engine)

    second = _make(engine, S.running)
    _finish(engine, second, "finish")
    _age(engine, [second], days=40)
    housekeeper.run_once()
    assert second in _ids(engine), "pruned again within prune_every_s"
    housekeeper.prune_every_s = 0
    housekeeper.run_once()
    assert second not in _ids(engine)


def test_pruning_goes_in_short_batches(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(housekeeping, "PRUNE_BATCH", 40)

    def fill(session: Session) -> list[int]:
        made = [_new(session, S.running, i) for i in range(130)]
        for job_id in made:
            leases.finish(
                session=session, job_id=job_id, worker_id="w", ending=leases.Ending(S.succeeded)
            )
        return made

    made = transact(engine, fill)
    _age(engine, made, days=100)
    commits: list[int] = []
    event.listen(engine, "commit", lambda _conn: commits.append(1))
    assert _worker(engine, settings).housekeeper.prune()[0] == 130
    assert _ids(engine) == set()
    assert len(commits) >= 4, "one transaction per batch of 40, not one for all 130"


@pytest.fixture
def dashboard(settings: Settings) -> Iterator[tuple[TestClient, Engine]]:
    platform = Platform(settings)
    platform.operators.add("olga", "correct horse battery")
    app = create_app(settings, platform=platform, embed_worker=False, mcp=False)
    base = "http://127.0.0.1:8000"
    with TestClient(app, base_url=base, follow_redirects=False) as client:
        r = client.post(
            "/login",
            data={"username": "olga", "password": "correct horse battery", "next": "/"},
            headers={"Origin": base},
        )
        assert r.status_code == 303, r.text
        yield client, platform.engine
    platform.engine.dispose()


def test_list_pages_never_load_arguments_results_or_output(
    dashboard: tuple[TestClient, Engine],
) -> None:
    client, engine = dashboard
    for n in range(30):
        job_id = _make(engine, S.running, n)
        _finish(engine, job_id, "finish")
        decided = _make(engine, S.pending_approval, n)
        _finish(engine, decided, "deny")
    statements: list[tuple[str, str]] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append((a[2], repr(a[3]))))
    for path in ("/jobs", "/jobs?state=succeeded", "/jobs?tool=outbox", "/approvals"):
        page = client.get(path)
        assert page.status_code == 200, page.text[:300]
        assert "send-message" in page.text
    job_reads = [
        sql
        for sql, params in statements
        if "FROM job" in sql
        # The live queue's cards show each call's arguments, so it loads them.
        and not ("pending_approval" in params and "!=" not in sql)
    ]
    assert len(job_reads) >= 4, statements
    assert any("decided_at IS NOT NULL" in sql for sql in job_reads), "the decided history"
    for sql in job_reads:
        head = sql.split("FROM job")[0]
        assert not any(column in head for column in HEAVY), sql
