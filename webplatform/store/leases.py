"""A worker's claims and leases, as SQL: the oldest approved job taken, a lease kept, the
lost reaped (`webplatform.jobs.leases` is the worker's door to them, and records a run's end).

A running job is owned by one worker through its lease; a worker that stops renewing it loses
the job to `reap_lost`, and its late result is refused by the compare-and-set that ends it.
A lease is written and reaped by the database server's clock (`webplatform.store.clock`), so
a worker whose own clock is off neither loses its lease early nor keeps it late.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session, col, select, update

from webplatform.store.audit_chain import lock_chain
from webplatform.store.clock import shared_now
from webplatform.store.models import Job, JobState
from webplatform.store.transitions import (
    Move,
    StaleState,
    Step,
    compare_and_set,
    move_overdue,
)

S = JobState
# The audit event of a claimed job given back to `approved` before its tool started.
HANDED_BACK = "handed-back"


def approved_waiting(*, session: Session) -> bool:
    """True when some job is `approved`, waiting for a worker (one indexed read, no lock): the
    cheap look an idle worker takes before it claims."""
    stmt = select(Job.id).where(Job.state == S.approved).limit(1)
    return session.exec(stmt).first() is not None


def claim_next(*, session: Session, worker_id: str, lease_s: float) -> Job | None:
    """Take the oldest approved job: it becomes `running`, owned by `worker_id` with a lease.

    Two workers never get the same job: PostgreSQL skips rows another claim has locked;
    SQLite serialises writers and the compare-and-set settles anything left.
    """
    stmt = (
        select(Job.id)
        .where(Job.state == S.approved)
        .order_by(col(Job.created_at), col(Job.id))
        .limit(1)
    )
    if session.get_bind().dialect.name == "postgresql":
        stmt = stmt.with_for_update(skip_locked=True)
    # The claim's move is audited: take the audit chain's lock before any row lock.
    lock_chain(session)
    for _ in range(20):
        job_id = session.exec(stmt).first()
        if job_id is None:
            return None
        now = shared_now(session)
        fields = {
            "worker_id": worker_id,
            "started_at": now,
            "lease_expires_at": now + timedelta(seconds=lease_s),
        }
        try:
            return compare_and_set(
                session,
                Move(job_id, Step(S.approved, S.running, worker_id), fields),
            )
        except StaleState:
            continue  # another worker won this one; try the next
    return None


def hand_back(*, session: Session, job_id: int, worker_id: str, why: str) -> Job:
    """Give a claimed job whose tool never started back to `approved`, for a worker to claim
    again (this one, once its ledger can record the decision), with `why` as its note.

    Only while the job is still `running` on `worker_id`; otherwise StaleState."""
    return compare_and_set(
        session,
        Move(
            job_id,
            Step(S.running, S.approved, worker_id, detail=f"not started, handed back: {why}"),
            fields={"worker_id": None, "started_at": None, "lease_expires_at": None, "note": why},
            owner=worker_id,
            event=HANDED_BACK,
        ),
    )


def renew_lease(*, session: Session, job_id: int, worker_id: str, lease_s: float) -> bool:
    """Extend a running job's lease; False if it is no longer running on `worker_id`."""
    stmt = (
        update(Job)
        .where(col(Job.id) == job_id, col(Job.state) == S.running, col(Job.worker_id) == worker_id)
        .values(lease_expires_at=shared_now(session) + timedelta(seconds=lease_s))
        .execution_options(synchronize_session=False)
    )
    return session.exec(stmt).rowcount == 1


def reap_lost(*, session: Session, now: datetime | None = None) -> int:
    """Mark running jobs whose lease ran out as `lost`; how many. Lost jobs never re-run."""
    now = now or shared_now(session)
    error = (
        "its worker stopped renewing the lease (it died or lost the database); "
        "it may or may not have had its effect, so it is not re-run"
    )
    # A renewal that landed between the scan and the move wins.
    return move_overdue(
        session,
        expected=S.running,
        to=S.lost,
        overdue=col(Job.lease_expires_at) < now,
        detail="lease expired",
        fields={"finished_at": now, "error": error},
    )
