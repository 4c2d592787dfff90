"""The worker with the real runner and the example outbox tool: at most once, always."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from webplatform.canonical import args_digest
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import calls, leases
from webplatform.jobs import states as jobs
from webplatform.process import runner
from webplatform.registry import RegistryLoader
from webplatform.store import Job, JobState, Surface, session_scope, transact
from webplatform.trust import signing
from webplatform.worker import Worker

S = JobState


def _worker(engine: Engine, settings: Settings, root: Path = EXAMPLES_ROOT, **kw: Any) -> Worker:
    loader = RegistryLoader([root])
    return Worker(
        engine=engine,
        settings=settings,
        load_registry=loader.load,
        run=runner.run,
        **kw,
    )


def _approved(
    engine: Engine, settings: Settings, args: dict[str, Any], name: str = "outbox"
) -> Job:
    signer = signing.signer_for(settings.home)

    def create(session: Any) -> Job:
        call = calls.Call(
            kind="tool",
            name=name,
            action="send-message",
            args=args,
            digest=args_digest(kind="tool", name=name, action="send-message", args=args),
            irreversible=True,
            surface=Surface.dashboard,
        )
        return calls.create_job(
            session=session, call=call, start=calls.Approved(decided_by="alice", signer=signer)
        )

    return transact(engine, create)


def _message(i: int | str, **extra: Any) -> dict[str, Any]:
    return {"to": "bob@example.org", "subject": f"m{i}", "body": "hello", **extra}


def _job(engine: Engine, job_id: int | None) -> Job:
    with session_scope(engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id or 0)
    assert job is not None
    return job


def _outbox(settings: Settings) -> list[dict[str, Any]]:
    folder = settings.home / "outbox"
    files = sorted(folder.glob("[!.]*.json")) if folder.is_dir() else []
    return [json.loads(f.read_text(encoding="utf-8")) for f in files]


def _wait_for(predicate: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_two_workers_race_and_every_job_runs_exactly_once(
    engine: Engine, settings: Settings
) -> None:
    created = [_approved(engine, settings, _message(i)) for i in range(50)]
    workers = [_worker(engine, settings, worker_id=f"w{n}") for n in range(2)]
    started = [w.start_thread() for w in workers]

    def all_done() -> bool:
        return all(_job(engine, j.id).state not in (S.approved, S.running) for j in created)

    try:
        _wait_for(all_done)
    finally:
        for thread, stop in started:
            stop.set()
            thread.join(timeout=30)
    sent = sorted(m["subject"] for m in _outbox(settings))
    assert sent == sorted(f"m{i}" for i in range(50))
    finished = [_job(engine, j.id) for j in created]
    assert {j.state for j in finished} == {S.succeeded}
    assert {j.worker_id for j in finished} <= {"w0", "w1"}
    with session_scope(engine, write=False) as session:
        for job in finished:
            events = [e.event for e in jobs.audit_events(session=session, job_id=job.id or 0)]
            assert events.count("claimed") == 1 and events.count("finished") == 1
        assert not jobs.fresh_heartbeat(session=session, role="worker", within_s=60)


def test_a_job_whose_tool_vanished_fails_clearly(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    root = tmp_path / "registry"
    shutil.copytree(EXAMPLES_ROOT / "tools" / "outbox", root / "tools" / "outbox")
    job = _approved(engine, settings, _message(1))
    shutil.rmtree(root / "tools" / "outbox")
    worker = _worker(engine, settings, root=root)
    assert worker.run_once()
    failed = _job(engine, job.id)
    assert failed.state == S.failed
    assert failed.error == "tool 'outbox' is no longer in the registry; not run"
    assert _outbox(settings) == []


def test_tampered_arguments_are_not_run(engine: Engine, settings: Settings) -> None:
    job = _approved(engine, settings, _message("approved"))
    tampered = json.dumps(_message("tampered", to="mallory@example.org"))
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE job SET args_json = :a WHERE id = :id"), {"a": tampered, "id": job.id}
        )
    assert _worker(engine, settings).run_once()
    refused = _job(engine, job.id)
    assert refused.state == S.failed
    assert refused.error and "no longer match the approved digest" in refused.error
    assert _outbox(settings) == []


def test_a_long_run_keeps_its_lease_while_others_housekeep(
    engine: Engine, settings: Settings
) -> None:
    # The run outlasts its lease more than twice; the lease leaves room for a loaded machine.
    quick = settings.model_copy(update={"worker_lease_s": 1.5, "heartbeat_s": 0.1})
    job = _approved(engine, settings, _message(1, **{"delay-s": 4}))
    worker = _worker(engine, quick)
    thread, stop = worker.start_thread()
    try:
        # Another process reaping dead leases the whole time must not take this live job.
        deadline = time.monotonic() + 30
        while _job(engine, job.id).state != S.succeeded and time.monotonic() < deadline:
            transact(engine, lambda s: leases.reap_lost(session=s))
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert _job(engine, job.id).state == S.succeeded
    assert len(_outbox(settings)) == 1


def test_a_job_whose_worker_died_is_lost_and_never_rerun(
    engine: Engine, settings: Settings
) -> None:
    job = _approved(engine, settings, _message(1))
    claimed = transact(
        engine, lambda s: leases.claim_next(session=s, worker_id="dead", lease_s=0.1)
    )
    assert claimed is not None and claimed.id == job.id
    time.sleep(0.2)
    worker = _worker(engine, settings)
    worker.housekeeper.run_once()
    assert not worker.run_once()
    lost = _job(engine, job.id)
    assert lost.state == S.lost
    assert _outbox(settings) == []


def test_cancelling_a_running_job_stops_it(engine: Engine, settings: Settings) -> None:
    quick = settings.model_copy(update={"worker_lease_s": 0.4})
    job = _approved(engine, settings, _message(1, **{"delay-s": 3}))
    worker = _worker(engine, quick)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (worker.run_once(), done.set()))
    thread.start()
    _wait_for(lambda: _job(engine, job.id).state == S.running)
    transact(engine, lambda s: jobs.cancel(session=s, job_id=job.id or 0, actor="alice"))
    assert done.wait(timeout=2.5), "the worker kept running a cancelled job"
    thread.join()
    assert _job(engine, job.id).state == S.cancelled
    assert _outbox(settings) == []


def test_run_results_are_recorded(engine: Engine, settings: Settings) -> None:
    job = _approved(engine, settings, _message(1))
    bad = _approved(engine, settings, _message(2, **{"delay-s": "soon"}))
    worker = _worker(engine, settings)
    assert worker.run_once() and worker.run_once()
    assert not worker.run_once()
    ok, usage = _job(engine, job.id), _job(engine, bad.id)
    assert ok.state == S.succeeded and ok.exit_code == 0
    assert ok.result_json and json.loads(ok.result_json)["sent"] is True
    assert usage.state == S.failed and usage.exit_code == 2
    assert usage.stderr and "delay-s" in usage.stderr


def test_an_idle_worker_is_woken_by_an_approval_not_by_its_poll(
    engine: Engine, settings: Settings
) -> None:
    # An hour between looks: only a wake-up from the approval (in-process on SQLite,
    # LISTEN/NOTIFY on PostgreSQL) can start the run within the wait below.
    worker = _worker(engine, settings)
    worker.housekeeper.run_once()
    stop = threading.Event()
    thread = threading.Thread(
        target=worker.run_forever, args=(stop,), kwargs={"poll_s": 3600, "listen_poll_s": 3600}
    )
    thread.start()
    try:
        time.sleep(0.5)  # let it go idle
        job = _approved(engine, settings, _message("wake"))
        _wait_for(lambda: _job(engine, job.id).state == S.succeeded, timeout_s=30)
    finally:
        stop.set()
        # A stopped worker notices at its next wake-up: make one.
        _approved(engine, settings, _message("bye"))
        thread.join(timeout=30)
    assert [m["subject"] for m in _outbox(settings)][:1] == ["mwake"]
