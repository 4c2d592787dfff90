"""Several hosts' worth of processes on one PostgreSQL database: every job runs exactly once.

Two `aat serve` (each with its embedded worker) and two `aat worker` processes share one
database and one AAT_HOME; 200 approved `outbox send-message` jobs go in while they run.
Each must end `succeeded`, with exactly one message in the outbox and one claim in its
audit trail, and the audit hash chain must verify afterwards. A session made on one
dashboard is valid on the other.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from proc_helpers import Procs, aat_env, job_rows, outbox_files, wait_for
from serving import free_port
from sqlmodel import col, func, select
from stepup_helpers import password_step_up

from webplatform.config import Settings
from webplatform.jobs.answers import Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store import AuditEvent, Job, JobState, Surface, session_scope

JOBS = 200
PASSWORD = "correct horse battery"


@pytest.mark.slow
def test_two_dashboards_and_two_workers_run_200_approved_jobs_exactly_once(
    pg_settings: Settings, procs: Procs
) -> None:
    platform = Platform(pg_settings)
    platform.operators.add("olga", PASSWORD)
    env = aat_env(pg_settings, worker_lease_s=10, heartbeat_s=1)
    ports = [free_port(), free_port()]
    for n, port in enumerate(ports):
        procs.serve(f"serve{n}", env, port)
    for n in range(2):
        procs.start(f"worker{n}", ["worker"], env)

    started = time.monotonic()
    actor = Actor(surface=Surface.dashboard, operator="olga", address="127.0.0.1")

    def queue(i: int) -> Status:
        args = {"to": "ops@example.org", "subject": f"m{i:03d}", "body": "hello"}
        return request_run(
            platform=platform,
            call=RunCall(kind="tool", name="outbox", action="send-message", args=args),
            actor=actor,
            consent=Consent.OPERATOR,
            step_up=password_step_up("olga", name="outbox", action="send-message", args=args),
        ).status

    # Queued from several threads while the executors already claim and run.
    with ThreadPoolExecutor(4) as pool:
        statuses = Counter(pool.map(queue, range(JOBS)))
    assert set(statuses) <= {Status.approved, Status.running, Status.succeeded}, statuses
    queued_s = time.monotonic() - started

    def all_done() -> bool:
        with session_scope(platform.engine, write=False) as session:
            live = [JobState.approved, JobState.running]
            stmt = select(func.count()).where(col(Job.state).in_(live))
            return int(session.exec(stmt).one()) == 0

    wait_for(all_done, 120, "every approved job to finish")
    elapsed = time.monotonic() - started

    rows = job_rows(platform.engine)
    assert len(rows) == JOBS
    assert Counter(JobState(r.state) for r in rows) == {JobState.succeeded: JOBS}
    messages = [json.loads(p.read_text()) for p in outbox_files(pg_settings)]
    subjects = Counter(m["subject"] for m in messages)
    assert len(messages) == JOBS, f"{len(messages)} messages for {JOBS} jobs"
    assert set(subjects) == {f"m{i:03d}" for i in range(JOBS)} and max(subjects.values()) == 1
    with session_scope(platform.engine, write=False) as session:
        claims = Counter(
            session.exec(
                select(AuditEvent.job_id).where(AuditEvent.to_state == JobState.running.value)
            ).all()
        )
    assert len(claims) == JOBS and set(claims.values()) == {1}, "one claim per job"
    # Four processes appended to the audit trail at once; the chain must not have forked.
    verified = subprocess.run(
        [sys.executable, "-m", "webplatform", "audit", "verify"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stderr
    assert "events checked" in verified.stdout
    by_process = Counter((r.worker_id or "").split(":")[1] for r in rows)
    assert len(by_process) >= 3, f"work spread over the processes: {by_process}"
    print(
        f"\n{JOBS} jobs queued in {queued_s:.1f} s, all finished in {elapsed:.1f} s; "
        f"{len(messages)} messages; runs per process (pid): {dict(by_process)}"
    )

    # One database behind both dashboards: a login on one is a login on the other.
    base0, base1 = (f"http://127.0.0.1:{p}" for p in ports)
    with httpx.Client(base_url=base0) as first:
        r = first.post(
            "/login",
            data={"username": "olga", "password": PASSWORD, "next": "/"},
            headers={"Origin": base0},
        )
        assert r.status_code == 303, r.text
        cookie = first.cookies.get("aat_session")
    assert cookie
    with httpx.Client(base_url=base1, cookies={"aat_session": cookie}) as second:
        page = second.get(f"/jobs/{rows[-1].id}")
    assert page.status_code == 200 and "succeeded" in page.text
    platform.engine.dispose()
