"""Workers look at approved jobs every few seconds even when no wake-up arrives (SPEC §20).

A row moved into `approved` by SQL sends no wake-up (no NOTIFY, no marker file touched), and
until a worker looks, every page reads the row. An idle worker of the kind `aat serve` embeds
(no housekeeping of its own, woken only by approvals) must still fail the forged job within
`APPROVED_LOOK_S`, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import text

from webplatform.canonical import args_digest
from webplatform.config import EXAMPLES_ROOT
from webplatform.jobs import calls
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.process import runner
from webplatform.registry import RegistryLoader
from webplatform.store import Job, JobState, Surface, session_scope, transact
from webplatform.trust import signing
from webplatform.trust.authority import seal_for
from webplatform.worker import APPROVED_LOOK_S, Worker

# Slack over the look interval for a loaded two-core machine; the defence's absence (a look a
# minute) is far outside it.
SLACK_S = 5.0


def _pending(platform: Platform) -> Job:
    args = {"to": "bob@example.org", "subject": "forged", "body": "hi"}

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
        start = calls.Waiting(ttl_s=900, seal=seal_for(platform))
        return calls.create_job(session=session, call=call, start=start)

    return transact(platform.engine, create)


def _state(platform: Platform, job_id: int) -> Job:
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
    assert job is not None
    return job


def test_an_idle_worker_fails_a_forged_approval_without_a_wake_up(platform: Platform) -> None:
    signing.signer_for(platform.settings.home)  # the dashboard has started once
    job = _pending(platform)
    assert job.id is not None
    worker = Worker(
        platform=platform,
        settings=platform.settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        housekeeping=False,  # as `aat serve` embeds it: only approvals wake it
    )
    thread, stop = worker.start_thread()
    try:
        time.sleep(0.5)  # let it look once and go idle
        with platform.engine.begin() as conn:  # a raw write: no NOTIFY, no marker touched
            conn.execute(
                text(
                    "UPDATE job SET state = 'approved', decided_by = 'alice', "
                    "decided_at = created_at WHERE id = :id"
                ),
                {"id": job.id},
            )
        forged_at = time.monotonic()
        deadline = forged_at + APPROVED_LOOK_S + SLACK_S
        while _state(platform, job.id).state == JobState.approved and time.monotonic() < deadline:
            time.sleep(0.1)
        took = time.monotonic() - forged_at
    finally:
        stop.set()
        thread.join(timeout=30)
    failed = _state(platform, job.id)
    assert failed.state == JobState.failed, f"still {failed.state.value} after {took:.1f} s"
    assert failed.error and "invalid signature" in failed.error
