"""Faults with real processes killed by SIGKILL: the queue keeps its promises.

- a worker dies mid-run: the job becomes `lost` once its lease runs out, and is never re-run;
- the MCP bridge dies while its call waits: the job stays pending, runs once when approved,
  and a new bridge's `job_status` returns the result;
- the dashboard restarts: pending approvals, operator sessions and history are all there;
- several processes write to one SQLite file at once: nothing lost, never "database is locked".
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from proc_helpers import (
    SEND,
    Procs,
    aat_env,
    job_rows,
    outbox_files,
    start_bridge,
    state_of,
    wait_for,
)
from serving import free_port
from sqlmodel import select
from stepup_helpers import password_step_up

from webplatform.config import Settings
from webplatform.jobs import decisions
from webplatform.jobs.answers import Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store import AuditEvent, JobState, Surface, session_scope
from webplatform.trust.stepup import StepUp, StepUpMethod

S = JobState
PASSWORD = "correct horse battery"
LEASE_S = 2.0


def _queue(platform: Platform, *, approved: bool, **args: object) -> int:
    actor = (
        Actor(surface=Surface.dashboard, operator="olga", address="127.0.0.1")
        if approved
        else Actor(surface=Surface.mcp_stdio, client="agent")
    )
    answer = request_run(
        platform=platform,
        call=RunCall(kind="tool", name="outbox", action="send-message", args={**SEND, **args}),
        actor=actor,
        consent=Consent.OPERATOR if approved else Consent.QUEUE,
        step_up=password_step_up(
            "olga", name="outbox", action="send-message", args={**SEND, **args}
        )
        if approved
        else None,
    )
    assert answer.job is not None, answer
    return answer.job


def _claims(platform: Platform, job_id: int) -> int:
    with session_scope(platform.engine, write=False) as session:
        stmt = select(AuditEvent.id).where(
            AuditEvent.job_id == job_id, AuditEvent.to_state == S.running.value
        )
        return len(session.exec(stmt).all())


@pytest.mark.slow
def test_worker_killed_mid_run_leaves_the_job_lost_and_never_reruns_it(
    settings: Settings, procs: Procs
) -> None:
    platform = Platform(settings)
    delay_s = 3.0
    job_id = _queue(platform, approved=True, **{"delay-s": delay_s})
    env = aat_env(settings, worker_lease_s=LEASE_S, heartbeat_s=0.3)
    doomed = procs.start("doomed-worker", ["worker"], env)
    wait_for(lambda: state_of(platform.engine, job_id) == S.running, 60, "the job to start")
    killed_at = time.monotonic()
    procs.sigkill(doomed)
    assert state_of(platform.engine, job_id) == S.running  # nobody has noticed yet

    procs.start("survivor", ["worker"], env)
    wait_for(lambda: state_of(platform.engine, job_id) == S.lost, 30, "the job to be lost")
    noticed_s = time.monotonic() - killed_at
    # The orphaned tool process finishes its sleep and may still send: that is the run,
    # once. The survivor must not send it again.
    time.sleep(max(0.0, delay_s + 1.5 - (time.monotonic() - killed_at)))
    assert state_of(platform.engine, job_id) == S.lost
    assert len(outbox_files(settings)) <= 1
    assert _claims(platform, job_id) == 1
    (row,) = job_rows(platform.engine)
    assert row.worker_id and f":{doomed.pid}:" in row.worker_id
    assert row.error and "not re-run" in row.error
    print(
        f"\n[{settings.database_url.split(':')[0]}] lost after {noticed_s:.1f} s "
        f"(lease {LEASE_S:g} s); outbox holds {len(outbox_files(settings))} message(s)"
    )
    platform.engine.dispose()


def _settled(platform: Platform, job_id: int) -> JobState | None:
    """`succeeded`, or `pending_approval` once a worker sent the job back for its preview."""
    state = state_of(platform.engine, job_id)
    if state == S.succeeded:
        return state
    with session_scope(platform.engine, write=False) as session:
        stmt = select(AuditEvent.id).where(
            AuditEvent.job_id == job_id, AuditEvent.event == "preview-changed"
        )
        sent_back = session.exec(stmt).first() is not None
    return state if sent_back and state == S.pending_approval else None


@pytest.mark.slow
def test_bridge_killed_while_waiting_keeps_the_job_and_a_new_bridge_gets_the_result(
    settings: Settings, procs: Procs
) -> None:
    platform = Platform(settings)
    env = aat_env(settings, approval_wait_s=60)
    bridge = start_bridge(procs, "bridge1", env)
    bridge.call(1, "run_tool_confirmed", {"tool": "outbox", "action": "send-message", "args": SEND})
    pending = wait_for(
        lambda: [r for r in job_rows(platform.engine) if r.state == S.pending_approval],
        30,
        "the call to be queued",
    )
    job = pending[0]
    assert job.id is not None
    procs.sigkill(bridge.proc)
    time.sleep(1.0)
    assert state_of(platform.engine, job.id) == S.pending_approval, "the job outlives its caller"

    def approve() -> None:
        # Not job_step_up: it waits for the preview, which a killed bridge may never finish.
        proof = StepUp(operator="olga", digest=job.args_digest, method=StepUpMethod.password)
        decisions.approve(
            platform=platform,
            job_id=job.id or 0,
            operator="olga",
            digest=job.args_digest,
            address=None,
            step_up=proof,
        )

    approve()
    procs.start("worker", ["worker"], env)
    # Killed before the preview it started had finished, the bridge left it pending, and the
    # approval bound that: the worker runs the preview before the run, finds it changed and
    # sends the call back (SPEC §20); the operator then approves the preview it shows.
    settled = wait_for(lambda: _settled(platform, job.id or 0), 60, "the approved run")
    if settled == S.pending_approval:
        approve()
        wait_for(lambda: state_of(platform.engine, job.id) == S.succeeded, 60, "the run")

    fresh = start_bridge(procs, "bridge2", env)
    fresh.call(2, "job_status", {"job": job.id, "wait_s": 5})
    answer = fresh.answer(2)["result"]
    assert answer["isError"] is False
    assert answer["structuredContent"]["status"] == "succeeded"
    assert answer["structuredContent"]["result"]["id"]
    assert len(outbox_files(settings)) == 1
    assert _claims(platform, job.id) == (2 if settled == S.pending_approval else 1)
    platform.engine.dispose()


def _log_in(client: httpx.Client, base: str) -> None:
    r = client.post(
        "/login",
        data={"username": "olga", "password": PASSWORD, "next": "/"},
        headers={"Origin": base},
    )
    assert r.status_code == 303, r.text


@pytest.mark.slow
def test_dashboard_restart_keeps_approvals_sessions_and_history(
    settings: Settings, procs: Procs
) -> None:
    platform = Platform(settings)
    platform.operators.add("olga", PASSWORD)
    ran = request_run(
        platform=platform,
        call=RunCall(kind="tool", name="hello-world", action="greet", args={"name": "Zoë"}),
        actor=Actor(surface=Surface.cli, client="test"),
        consent=Consent.NONE,
    )
    assert ran.status is Status.succeeded and ran.job is not None
    pending = _queue(platform, approved=False, subject="survives restarts")

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = aat_env(settings)
    first = procs.serve("serve-before", env, port)
    with httpx.Client(base_url=base) as browser:
        _log_in(browser, base)
        assert f'data-job-id="{pending}"' in browser.get("/approvals").text

        procs.sigkill(first)
        procs.serve("serve-after", env, port)

        queue = browser.get("/approvals")
        assert queue.status_code == 200, "the session cookie is still valid"
        assert f'data-job-id="{pending}"' in queue.text and "survives restarts" in queue.text
        history = browser.get(f"/jobs/{ran.job}")
        assert history.status_code == 200 and "Hello, Zoë!" in history.text
        listing = browser.get("/jobs").text
        assert f"/jobs/{ran.job}" in listing and f"/jobs/{pending}" in listing

        page = browser.get(f"/jobs/{pending}").text
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page)
        digest = re.search(r'name="digest" value="([0-9a-f]+)"', page)
        assert token and digest
        decided = browser.post(
            f"/jobs/{pending}/approve",
            data={
                "csrf_token": token[1],
                "digest": digest[1],
                "return_to": "job",
                "password": PASSWORD,
            },
            headers={"Origin": base},
        )
        assert decided.status_code in (200, 303), decided.text[:300]
    wait_for(lambda: state_of(platform.engine, pending) == S.succeeded, 60, "the approved run")
    assert len(outbox_files(settings)) == 1
    platform.engine.dispose()


def unpreviewed_registry(tmp_path: Path) -> Path:
    """A registry of one irreversible action without a preview. The writers race on the
    database; a preview would add a confined subprocess per queued call (800 of them, most of
    this test's CPU) and writes the test does not count."""
    tool = tmp_path / "registry" / "tools" / "notes"
    tool.mkdir(parents=True)
    (tool / "main.py").write_text("print('{}')\n")
    (tool / "tool.yaml").write_text(
        textwrap.dedent(
            """
            name: notes
            description: Test fixture - an irreversible action with no preview.
            version: 0.1.0
            runtime: python
            entrypoint: main.py
            actions:
              - name: send
                description: Send a note.
                args:
                  - {name: to, type: string, required: true}
                  - {name: subject, type: string, required: true}
                  - {name: body, type: string, required: true}
            """
        )
    )
    return tool.parent.parent


WRITER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from webplatform.jobs import states as jobs
    from webplatform.config import get_settings
    from webplatform.platform import Actor, Platform
    from webplatform.jobs.services import Consent, RunCall, request_run
    from webplatform.store import Surface, transact

    name, count, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    platform = Platform(get_settings())
    actor = Actor(surface=Surface.mcp_stdio, client=name)
    while not go.exists():
        time.sleep(0.01)
    made, cancelled = [], 0
    for i in range(count):
        answer = request_run(
            platform=platform,
            call=RunCall(kind="tool", name="notes", action="send",
                         args={"to": "ops@example.org", "subject": f"{name}-{i}", "body": "x"}),
            actor=actor, consent=Consent.QUEUE,
        )
        assert answer.status.value == "pending_approval", answer.to_dict()
        made.append(answer.job)
        if i % 2:
            # A read-then-write move from a second door, racing the other writers.
            transact(platform.engine, lambda s: jobs.cancel(
                session=s, job_id=made[-1], actor=name, reason="fuzz"))
            cancelled += 1
    print(json.dumps({"made": len(made), "cancelled": cancelled}))
    """
)


@pytest.mark.slow
def test_concurrent_writers_on_one_sqlite_file_lose_nothing(tmp_path: Path, procs: Procs) -> None:
    settings = Settings(home=tmp_path / "aat-home", registry=str(unpreviewed_registry(tmp_path)))
    platform = Platform(settings)  # migrated before the writers start
    go, per_process = tmp_path / "go", 200
    # Each writer leaves about half its calls waiting: more than the default per-requester cap.
    env = aat_env(settings, max_pending=per_process, registry=settings.registry)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, f"w{n}", str(per_process), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    time.sleep(1.0)  # let them all import and open the database
    started = time.monotonic()
    go.touch()
    outputs = [w.communicate(timeout=240) for w in writers]
    elapsed = time.monotonic() - started
    for writer, (out, err) in zip(writers, outputs, strict=True):
        assert writer.returncode == 0, err[-3000:]
        assert "locked" not in err.lower() and "busy" not in err.lower(), err[-3000:]
        assert json.loads(out) == {"made": per_process, "cancelled": per_process // 2}
    rows = job_rows(platform.engine)
    assert len(rows) == 4 * per_process
    assert Counter(r.state for r in rows) == {S.pending_approval: 400, S.cancelled: 400}
    assert len({r.args_digest for r in rows}) == 4 * per_process
    with session_scope(platform.engine, write=False) as session:
        events = Counter(session.exec(select(AuditEvent.event)).all())
    assert events == {"created": 800, "cancelled": 400}
    print(f"\n4 processes wrote 800 jobs and 400 cancels in {elapsed:.1f} s, none lost")
    platform.engine.dispose()
