"""One approval, one run: a job put back to `approved` by SQL never runs a second time.

Each test approves a real `outbox send-message` the way the dashboard does (signed), runs it
with the real worker and runner, then re-arms the row as someone with database write access
could (`UPDATE job SET state = 'approved', worker_id = NULL ...`), keeping its old, valid
signature. The decision ledger in AAT_HOME must refuse it: the job ends `failed` naming the
reused decision, an audit event says so, and the outbox never gets a second message.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from stepup_helpers import job_step_up

from dashboard.app import create_app
from webplatform.canonical import args_digest
from webplatform.cli.main import main as aat
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import calls, decisions, leases
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.process import runner
from webplatform.registry import RegistryLoader
from webplatform.store import Job, JobState, Surface, session_scope, transact, utcnow
from webplatform.trust import ledger, signing
from webplatform.trust.authority import seal_for
from webplatform.worker import Worker

S = JobState
PASSWORD = "correct horse battery"
# What the attacker runs: the finished job is approved again, for any worker to take.
RE_ARM = (
    "UPDATE job SET state = 'approved', worker_id = NULL, lease_expires_at = NULL, "
    "finished_at = NULL, exit_code = NULL, result_json = NULL, error = NULL WHERE id = :id"
)


def _worker(platform: Platform, settings: Settings | None = None, name: str = "w") -> Worker:
    """A worker as a fresh `aat worker` process would make it: nothing remembered but files."""
    return Worker(
        platform=platform,
        settings=settings or platform.settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        worker_id=name,
    )


def _approved(platform: Platform, subject: str, **extra: Any) -> Job:
    """A queued call approved by an operator through the dashboard's decision code."""
    args = {"to": "bob@example.org", "subject": subject, "body": "hi", **extra}

    def create(session: Any) -> Job:
        call = calls.Call(
            kind="tool",
            name="outbox",
            action="send-message",
            args=args,
            digest=args_digest(kind="tool", name="outbox", action="send-message", args=args),
            irreversible=True,
            surface=Surface.mcp_stdio,
            client="agent",
        )
        return calls.create_job(
            session=session, call=call, start=calls.Waiting(ttl_s=900, seal=seal_for(platform))
        )

    job = transact(platform.engine, create)
    decisions.approve(
        platform=platform,
        job_id=job.id or 0,
        operator="olga",
        digest=job.args_digest,
        address="127.0.0.1",
        step_up=job_step_up(platform, job.id or 0, "olga"),
    )
    return _job(platform, job.id)


def _sql(engine: Engine, statement: str, **params: Any) -> None:
    with engine.begin() as conn:
        conn.execute(text(statement), params)


def _job(platform: Platform, job_id: int | None) -> Job:
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id or 0)
    assert job is not None
    return job


def _events(platform: Platform, job_id: int | None) -> list[Any]:
    with session_scope(platform.engine, write=False) as session:
        return jobs.audit_events(session=session, job_id=job_id or 0)


def _outbox(settings: Settings) -> list[str]:
    folder = settings.home / "outbox"
    return sorted(p.name for p in folder.glob("[!.]*.json")) if folder.is_dir() else []


def _assert_reused(platform: Platform, job_id: int | None) -> Job:
    """The re-armed job was claimed and refused as a reused decision, with its audit event."""
    job = _job(platform, job_id)
    assert job.state == S.failed, job.error
    error = job.error or ""
    assert "\n" not in error
    assert re.search(r"decision sha256:[0-9a-f]{16}, by olga at ", error), error
    assert "was already used to start a run at" in error and "not run" in error, error
    assert job.exit_code is None and job.result_json is None
    refused = [e for e in _events(platform, job_id) if e.event == ledger.REUSED]
    assert len(refused) == 1 and "already used" in (refused[0].detail or "")
    assert "outbox send-message" in (refused[0].detail or "")
    return job


def test_a_job_moved_back_to_approved_after_its_run_never_runs_again(
    platform: Platform, settings: Settings
) -> None:
    job = _approved(platform, "once")
    assert _worker(platform).run_once()
    assert _job(platform, job.id).state == S.succeeded
    assert len(_outbox(settings)) == 1

    _sql(platform.engine, RE_ARM, id=job.id)
    assert _job(platform, job.id).decision_signature == job.decision_signature
    # A restarted worker: what stops it is the ledger file, not its memory.
    assert _worker(platform, name="w-restarted").run_once()
    _assert_reused(platform, job.id)
    assert len(_outbox(settings)) == 1

    _sql(platform.engine, RE_ARM, id=job.id)  # and again, to the worker that ran it
    assert _worker(platform).run_once()
    assert _job(platform, job.id).state == S.failed
    assert len(_outbox(settings)) == 1


def test_a_lost_job_moved_back_to_approved_never_runs(
    platform: Platform, settings: Settings
) -> None:
    job = _approved(platform, "lost", **{"delay-s": 2})
    # A short lease, renewed often: the worker learns within moments that the job is lost.
    worker = _worker(platform, settings.model_copy(update={"worker_lease_s": 0.6}))
    done = threading.Event()
    thread = threading.Thread(target=lambda: (worker.run_once(), done.set()))
    thread.start()
    deadline = time.monotonic() + 30
    while _job(platform, job.id).state != S.running:
        assert time.monotonic() < deadline, "the worker never started the job"
        time.sleep(0.05)
    # Its lease is taken as run out: housekeeping marks it lost and the worker stops the tool.
    later = utcnow() + timedelta(hours=1)
    assert transact(platform.engine, lambda s: leases.reap_lost(session=s, now=later)) == 1
    assert done.wait(timeout=20), "the worker kept running a lost job"
    thread.join()
    assert _job(platform, job.id).state == S.lost
    sent = _outbox(settings)  # lost: the tool may or may not have had its effect

    _sql(platform.engine, RE_ARM, id=job.id)
    assert _worker(platform, name="w2").run_once()
    _assert_reused(platform, job.id)
    assert _outbox(settings) == sent


def test_a_decision_older_than_the_window_plus_the_lease_never_runs(
    platform: Platform, settings: Settings
) -> None:
    short = settings.model_copy(update={"approval_ttl_s": 60.0, "worker_lease_s": 10.0})
    signer = signing.signer_for(settings.home)

    def approved_ago(subject: str, seconds: float) -> Job:
        pending = _approved_later(platform, subject)
        then = utcnow() - timedelta(seconds=seconds)
        return transact(
            platform.engine,
            lambda s: jobs.approve(
                session=s,
                job_id=pending.id or 0,
                operator="olga",
                digest=pending.args_digest,
                signer=signer,
                context=jobs.Context(now=then),
            ),
        )

    old, recent = approved_ago("old", 75), approved_ago("recent", 40)
    worker = _worker(platform, short)
    assert worker.run_once()
    refused = _job(platform, old.id)
    assert refused.state == S.failed
    assert "older than the approval window plus the lease time (70 s" in (refused.error or "")
    events = [e for e in _events(platform, old.id) if e.event == ledger.TOO_OLD]
    assert len(events) == 1
    assert _outbox(settings) == []
    assert worker.run_once()
    assert _job(platform, recent.id).state == S.succeeded
    assert len(_outbox(settings)) == 1


def _approved_later(platform: Platform, subject: str) -> Job:
    """A queued call, not yet approved."""
    args = {"to": "bob@example.org", "subject": subject, "body": "hi"}

    def create(session: Any) -> Job:
        call = calls.Call(
            kind="tool",
            name="outbox",
            action="send-message",
            args=args,
            digest=args_digest(kind="tool", name="outbox", action="send-message", args=args),
            irreversible=True,
            surface=Surface.mcp_stdio,
        )
        return calls.create_job(
            session=session, call=call, start=calls.Waiting(ttl_s=900, seal=seal_for(platform))
        )

    return transact(platform.engine, create)


def test_two_workers_holding_one_decision_start_it_once(
    platform: Platform, settings: Settings
) -> None:
    for n in range(3):
        job = _approved(platform, f"race {n}")
        first, second = _worker(platform, name=f"a{n}"), _worker(platform, name=f"b{n}")
        # Both hold the job's decision: the first claims it, the row is re-armed at once, the
        # second claims it too; then both try to start it at the same moment.
        held = [_claim(platform, first)]
        _sql(platform.engine, RE_ARM, id=job.id)
        held.append(_claim(platform, second))
        assert [j.id for j in held] == [job.id, job.id]
        sent = len(_outbox(settings))
        _start_together(settings, [(first, held[0]), (second, held[1])])
        assert len(_outbox(settings)) == sent + 1, f"round {n}: the decision started twice"
    records = (settings.home / ledger.LEDGER_FILE).read_text().splitlines()
    assert len(records) == 3
    assert len({json.loads(r)["decision"] for r in records}) == 3


def _start_together(settings: Settings, claims: list[tuple[Worker, Job]]) -> None:
    """Each worker starts the job it claimed, all at once, each in a thread of its own."""
    verifier = signing.verifier_for(settings)
    together = threading.Barrier(len(claims))

    def start(worker: Worker, claimed: Job) -> None:
        together.wait()
        worker.start_claimed(claimed, verifier)

    threads = [threading.Thread(target=start, args=claim) for claim in claims]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)


def _claim(platform: Platform, worker: Worker) -> Job:
    claimed = transact(
        platform.engine,
        lambda s: leases.claim_next(session=s, worker_id=worker.worker_id, lease_s=60),
    )
    assert claimed is not None
    return claimed


def test_a_worker_waits_while_another_records_and_then_sees_its_record(tmp_path: Path) -> None:
    path = tmp_path / "home" / ledger.LEDGER_FILE
    decision = signing.Decision(
        job_id=7,
        digest="0" * 64,
        kind="tool",
        name="outbox",
        action="send-message",
        decision="approved",
        operators=("olga",),
        at=datetime.now(UTC),
    )
    path.parent.mkdir(mode=0o700)
    answers: list[ledger.Refusal | None] = []
    # Another worker on this host, in the middle of recording the same decision.
    with open(os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600), "ab") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        mine = ledger.DecisionLedger(path)
        thread = threading.Thread(
            target=lambda: answers.append(mine.admit(decision, worker_id="w", max_age_s=60))
        )
        thread.start()
        thread.join(timeout=0.5)
        assert thread.is_alive(), "the ledger was read without waiting for its lock"
        record = {"decision": ledger.decision_digest(decision), "started_at": "2030-01-01T00:00Z"}
        other.write(json.dumps(record).encode() + b"\n")
        other.flush()
    thread.join(timeout=30)
    assert len(answers) == 1 and answers[0] is not None
    assert answers[0].event == ledger.REUSED
    assert "already used to start a run at 2030-01-01T00:00Z" in answers[0].problem
    assert len(path.read_text().splitlines()) == 1


def test_a_ledger_other_users_can_change_stops_the_worker(
    platform: Platform, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    first = _approved(platform, "first")
    assert _worker(platform).run_once()
    assert _job(platform, first.id).state == S.succeeded
    path = settings.home / ledger.LEDGER_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o666)
    job = _approved(platform, "second")
    assert not _worker(platform).run_once()
    assert _job(platform, job.id).state == S.approved  # left queued, untouched
    assert f"run `chmod 600 {path}`" in caplog.text
    path.chmod(0o600)
    assert _worker(platform).run_once()
    assert _job(platform, job.id).state == S.succeeded


def _verify(settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> tuple[int, str]:
    """`aat audit verify` (its code, in this process): exit code and stderr."""
    monkeypatch.setenv("AAT_HOME", str(settings.home))
    if settings.db_url.get_secret_value():
        monkeypatch.setenv("AAT_DB_URL", settings.db_url.get_secret_value())
    capsys.readouterr()
    code = aat(["audit", "verify"])
    out, err = capsys.readouterr()
    assert re.fullmatch(r"audit chain intact: \d+ events checked\n", out), out
    return code, err


def test_audit_verify_names_a_job_whose_state_disagrees_with_its_events(
    platform: Platform,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    job = _approved(platform, "audited")
    other = _approved(platform, "left alone")
    assert _worker(platform).run_once() and _worker(platform).run_once()
    assert _verify(settings, monkeypatch, capsys) == (0, "")

    _sql(platform.engine, RE_ARM, id=job.id)
    code, err = _verify(settings, monkeypatch, capsys)
    finished = next(e.id for e in _events(platform, job.id) if e.event == "finished")
    assert code == 1
    assert err == (
        f"job {job.id}: state approved, but its last audit event {finished} (finished) left "
        "it succeeded: the row was changed outside aat\n"
    )

    # Refused by the worker, the job's state and its last event agree again; the trail
    # still shows it was claimed from a state its events never put it in.
    assert _worker(platform).run_once()
    code, err = _verify(settings, monkeypatch, capsys)
    claimed = [e.id for e in _events(platform, job.id) if e.event == "claimed"][-1]
    assert code == 1
    assert err == (
        f"job {job.id}: event {claimed} (claimed) moved it from approved, but event "
        f"{finished} (finished) had left it succeeded: the row was changed outside aat in "
        "between\n"
    )

    # A finished state no event ever recorded.
    _sql(platform.engine, "UPDATE job SET state = 'failed' WHERE id = :id", id=other.id)
    code, err = _verify(settings, monkeypatch, capsys)
    assert code == 1 and len(err.splitlines()) == 2
    assert f"job {other.id}: state failed, but its last audit event " in err
    assert "(finished) left it succeeded" in err

    # A finished job no event ever mentions: a row copied in by SQL.
    columns = ", ".join(c.name for c in Job.__table__.c if c.name != "id")  # type: ignore[attr-defined]
    _sql(
        platform.engine,
        f"INSERT INTO job ({columns}) SELECT {columns} FROM job WHERE id = :id",
        id=job.id,
    )
    code, err = _verify(settings, monkeypatch, capsys)
    assert code == 1 and len(err.splitlines()) == 3
    assert err.splitlines()[-1] == (
        f"job {(other.id or 0) + 1}: state failed, but no audit event records a state for it: "
        "the row was written outside aat"
    )


def _login(client: TestClient, base: str) -> None:
    r = client.post(
        "/login",
        data={"username": "olga", "password": PASSWORD, "next": "/"},
        headers={"Origin": base},
    )
    assert r.status_code == 303, r.text


def test_a_run_form_job_moved_back_to_approved_never_runs_again_and_says_why(
    platform: Platform, settings: Settings
) -> None:
    platform.operators.add("olga", PASSWORD)
    app = create_app(settings, platform=platform, embed_worker=False, mcp=False)
    base = "http://127.0.0.1:8000"
    with TestClient(app, base_url=base, follow_redirects=False) as client:
        _login(client, base)
        form = client.get("/run/tool/outbox/send-message").text
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', form)
        assert csrf
        r = client.post(
            "/run/tool/outbox/send-message",
            data={
                "csrf_token": csrf.group(1),
                "arg:to": "bob@example.org",
                "arg:subject": "from the form",
                "arg:body": "hi",
                "confirm": "yes",
                "password": PASSWORD,
            },
            headers={"Origin": base},
        )
        assert r.status_code == 303, r.text
        job_id = int(r.headers["location"].rsplit("/", 1)[1])
        assert _worker(platform).run_once()
        assert _job(platform, job_id).state == S.succeeded
        assert len(_outbox(settings)) == 1

        _sql(platform.engine, RE_ARM, id=job_id)
        assert _worker(platform, name="w2").run_once()
        _assert_reused(platform, job_id)
        assert len(_outbox(settings)) == 1
        page = client.get(f"/jobs/{job_id}")
        assert page.status_code == 200
        assert 'class="notice error forged"' in page.text
        assert "was already used to start a run" in page.text
