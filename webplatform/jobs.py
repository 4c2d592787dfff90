"""The job state machine: every state change is a compare-and-set with an audit event.

`UPDATE job SET state = :to ... WHERE id = :id AND state = :expected` decides every race in
the database, so two operators clicking at once (or two workers claiming) get one winner;
the loser gets `StaleState` naming what happened. Functions take the caller's session and
never commit, except `approve` recording an expiry (see there). Run them through
`webplatform.store.transact(engine, lambda s: ...)` so SQLite lock waits are retried.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement
from sqlmodel import Session, col, select, update

from webplatform.canonical import args_digest, canonical_json
from webplatform.store.audit import audit_events, record_event
from webplatform.store.heartbeats import beat, forget_heartbeat, fresh_heartbeat
from webplatform.store.models import (
    TERMINAL_STATES,
    Job,
    JobState,
    Surface,
    utcnow,
)
from webplatform.store.notify import notify_job
from webplatform.store.queries import (
    count_pending,
    get_job,
    list_jobs,
    pending_approvals,
    prune_finished,
)
from webplatform.store.transitions import (
    LEGAL_MOVES,
    ApprovalExpired,
    DigestMismatch,
    IllegalMove,
    JobError,
    JobNotFound,
    StaleState,
)
from webplatform.store.transitions import compare_and_set as _cas
from webplatform.store.transitions import fetch_job as _fetch
from webplatform.store.transitions import stale_error as _stale

__all__ = [
    "LEGAL_MOVES",
    "TERMINAL_STATES",
    "ApprovalExpired",
    "DigestMismatch",
    "IllegalMove",
    "JobError",
    "JobNotFound",
    "StaleState",
    "approve",
    "audit_events",
    "beat",
    "cancel",
    "claim_next",
    "count_pending",
    "create_job",
    "deny",
    "expire_due",
    "finish",
    "forget_heartbeat",
    "fresh_heartbeat",
    "get_job",
    "list_jobs",
    "move",
    "pending_approvals",
    "prune_finished",
    "reap_lost",
    "renew_lease",
]

S = JobState
INITIAL_STATES = frozenset({S.pending_approval, S.approved, S.running})
FINISH_STATES = frozenset({S.succeeded, S.failed, S.timed_out})
_SCAN_BATCH = 500


def move(
    *,
    session: Session,
    job_id: int,
    expected: JobState,
    to: JobState,
    actor: str,
    address: str | None = None,
    detail: str | None = None,
    **fields: Any,
) -> Job:
    """Move job `job_id` from `expected` to `to`, setting `fields`, and audit it.

    Raises IllegalMove if LEGAL_MOVES forbids it, JobNotFound, or StaleState if the job
    was not in `expected` any more (someone else moved it first).
    """
    return _cas(
        session,
        job_id=job_id,
        expected=expected,
        to=to,
        actor=actor,
        address=address,
        detail=detail,
        fields=fields,
    )


def _call_detail(job: Job) -> str:
    # Decision events outlive the job row, so they name the exact call themselves.
    return f"{job.kind} {job.name} {job.action} sha256:{job.args_digest}"


def create_job(
    *,
    session: Session,
    kind: str,
    name: str,
    action: str,
    args: dict[str, Any],
    digest: str,
    irreversible: bool,
    state: JobState | str,
    surface: Surface | str,
    client: str | None = None,
    requested_by: str | None = None,
    ttl_s: float | None = None,
    worker_id: str | None = None,
    lease_s: float | None = None,
    address: str | None = None,
    rerun_of: int | None = None,
    decided_by: str | None = None,
) -> Job:
    """Record a new job in `state` and audit it.

    - `pending_approval`: waits for an operator; expires after `ttl_s` (None: never).
    - `approved`: an operator ran it from the dashboard after confirming (`decided_by`).
    - `running`: a reversible call run inline by the requester (`worker_id`, `lease_s`);
      the requester must renew the lease while it runs, or the job is reaped as lost.

    `args` are stored as given (secrets already masked) and `digest` must be
    `args_digest(kind, name, action, args)` over exactly those args, since the worker
    re-checks it from the stored row before running.
    """
    state, surface = JobState(state), Surface(surface)  # plain strings are accepted too
    if kind not in ("tool", "agent"):
        raise ValueError(f"kind must be 'tool' or 'agent', not {kind!r}")
    if state not in INITIAL_STATES:
        raise IllegalMove(f"a job cannot start as {state.value}")
    if irreversible and state == S.running:
        raise IllegalMove("an irreversible job cannot start running: it needs an approval")
    if digest != args_digest(kind=kind, name=name, action=action, args=args):
        raise DigestMismatch("digest is not args_digest(kind, name, action, args) of these args")
    now = utcnow()
    job = Job(
        kind=kind,
        name=name,
        action=action,
        args_json=canonical_json(args),
        args_digest=digest,
        irreversible=irreversible,
        state=state,
        surface=surface,
        client=client,
        requested_by=requested_by,
        created_at=now,
        updated_at=now,
        rerun_of=rerun_of,
    )
    if state == S.pending_approval and ttl_s is not None:
        job.expires_at = now + timedelta(seconds=ttl_s)
    if state == S.approved:
        if not decided_by:
            raise ValueError("an approved job needs decided_by (the operator who ran it)")
        job.decided_by, job.decided_at, job.decided_from = decided_by, now, address
    if state == S.running:
        if not worker_id or lease_s is None:
            raise ValueError("a running job needs worker_id and lease_s")
        job.worker_id, job.started_at = worker_id, now
        job.lease_expires_at = now + timedelta(seconds=lease_s)
    session.add(job)
    session.flush()
    actor = decided_by or requested_by or client or surface.value
    job_id = job.id
    record_event(
        session=session,
        actor=actor,
        event="created",
        job_id=job_id,
        to_state=state.value,
        detail=_call_detail(job),
        address=address,
    )
    if state == S.approved:
        record_event(
            session=session,
            actor=actor,
            event="approved",
            job_id=job_id,
            to_state=state.value,
            detail=_call_detail(job),
            address=address,
        )
    notify_job(session, job.id or 0, state)
    return job


def approve(
    *,
    session: Session,
    job_id: int,
    operator: str,
    digest: str,
    address: str | None = None,
    now: datetime | None = None,
) -> Job:
    """Approve a pending job for exactly the call the operator saw (`digest`).

    Raises DigestMismatch if the job's digest differs, StaleState if it was already
    decided, and ApprovalExpired if its window has closed: the job is then moved to
    `expired` and that move is committed before raising, so the refusal sticks.
    """
    now = now or utcnow()
    job = _fetch(session, job_id)
    if job.state != S.pending_approval:
        raise _stale(job, S.pending_approval)
    if digest != job.args_digest:
        raise DigestMismatch(
            f"job {job_id} is not the call you reviewed (digest differs); reload and decide again"
        )
    if job.expires_at is not None and job.expires_at <= now:
        _cas(
            session,
            job_id=job_id,
            expected=S.pending_approval,
            to=S.expired,
            actor="system",
            address=address,
            fields={},
            detail=f"approval by {operator} came after expiry; refused",
        )
        session.commit()
        raise ApprovalExpired(job_id)
    return _cas(
        session,
        job_id=job_id,
        expected=S.pending_approval,
        to=S.approved,
        actor=operator,
        address=address,
        detail=_call_detail(job),
        fields={"decided_by": operator, "decided_at": now, "decided_from": address},
    )


def deny(
    *,
    session: Session,
    job_id: int,
    operator: str,
    reason: str | None = None,
    address: str | None = None,
) -> Job:
    """Refuse a pending job; `reason` is passed on to the requesting agent."""
    now = utcnow()
    job = _fetch(session, job_id)
    fields = {
        "decided_by": operator,
        "decided_at": now,
        "decided_from": address,
        "reason": reason,
        "finished_at": now,
    }
    return _cas(
        session,
        job_id=job_id,
        expected=S.pending_approval,
        to=S.denied,
        actor=operator,
        address=address,
        detail=reason or _call_detail(job),
        fields=fields,
    )


def cancel(
    *,
    session: Session,
    job_id: int,
    actor: str,
    reason: str | None = None,
    address: str | None = None,
) -> Job:
    """Withdraw a pending, approved or running job. A running subprocess is not killed
    here: its worker's lease renewal and final CAS fail, so its result is discarded."""
    job = _fetch(session, job_id)
    if S.cancelled not in LEGAL_MOVES[job.state]:
        raise _stale(job, job.state)
    fields: dict[str, Any] = {"reason": reason, "finished_at": utcnow()}
    if job.state == S.pending_approval:
        fields |= {
            "decided_by": actor,
            "decided_at": fields["finished_at"],
            "decided_from": address,
        }
    return _cas(
        session,
        job_id=job_id,
        expected=job.state,
        to=S.cancelled,
        actor=actor,
        address=address,
        detail=reason,
        fields=fields,
    )


def expire_due(*, session: Session, now: datetime | None = None) -> int:
    """Move every pending job whose approval window has closed to `expired`; how many."""
    now = now or utcnow()
    # A job decided between the scan and its move keeps that decision.
    return _move_overdue(
        session,
        expected=S.pending_approval,
        to=S.expired,
        overdue=col(Job.expires_at) <= now,
        detail="nobody decided in time",
        fields={"finished_at": now},
    )


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
    for _ in range(20):
        job_id = session.exec(stmt).first()
        if job_id is None:
            return None
        now = utcnow()
        fields = {
            "worker_id": worker_id,
            "started_at": now,
            "lease_expires_at": now + timedelta(seconds=lease_s),
        }
        try:
            return _cas(
                session,
                job_id=job_id,
                expected=S.approved,
                to=S.running,
                actor=worker_id,
                address=None,
                detail=None,
                fields=fields,
            )
        except StaleState:
            continue  # another worker won this one; try the next
    return None


def renew_lease(*, session: Session, job_id: int, worker_id: str, lease_s: float) -> bool:
    """Extend a running job's lease; False if it is no longer running on `worker_id`."""
    stmt = (
        update(Job)
        .where(col(Job.id) == job_id, col(Job.state) == S.running, col(Job.worker_id) == worker_id)
        .values(lease_expires_at=utcnow() + timedelta(seconds=lease_s))
        .execution_options(synchronize_session=False)
    )
    return session.exec(stmt).rowcount == 1


def finish(
    *,
    session: Session,
    job_id: int,
    worker_id: str,
    state: JobState,
    exit_code: int | None = None,
    result_json: str | None = None,
    stdout: str | None = None,
    stderr: str | None = None,
    error: str | None = None,
) -> Job:
    """Record how a run ended (`succeeded`, `failed` or `timed_out`).

    Only while the job is still `running` on `worker_id`; otherwise StaleState (it was
    cancelled or reaped as lost, and that verdict stands).
    """
    if state not in FINISH_STATES:
        raise IllegalMove(f"a run cannot finish as {state.value}")
    fields = {
        "finished_at": utcnow(),
        "lease_expires_at": None,
        "exit_code": exit_code,
        "result_json": result_json,
        "stdout": stdout,
        "stderr": stderr,
        "error": error,
    }
    try:
        return _cas(
            session,
            job_id=job_id,
            expected=S.running,
            to=state,
            actor=worker_id,
            address=None,
            detail=f"exit code {exit_code}",
            fields=fields,
            extra=(col(Job.worker_id) == worker_id,),
        )
    except StaleState as exc:
        if exc.actual == S.running:
            raise StaleState(
                job_id=job_id,
                expected=S.running,
                actual=S.running,
                decided_by=exc.decided_by,
                message=f"job {job_id} is running on another worker",
            ) from None
        raise


def reap_lost(*, session: Session, now: datetime | None = None) -> int:
    """Mark running jobs whose lease ran out as `lost`; how many. Lost jobs never re-run."""
    now = now or utcnow()
    error = (
        "its worker stopped renewing the lease (it died or lost the database); "
        "it may or may not have had its effect, so it is not re-run"
    )
    # A renewal that landed between the scan and the move wins.
    return _move_overdue(
        session,
        expected=S.running,
        to=S.lost,
        overdue=col(Job.lease_expires_at) < now,
        detail="lease expired",
        fields={"finished_at": now, "error": error},
    )


def _move_overdue(
    session: Session,
    *,
    expected: JobState,
    to: JobState,
    overdue: ColumnElement[bool],
    detail: str,
    fields: dict[str, Any],
) -> int:
    """Move up to a batch of `expected` jobs matching `overdue` to `to`, each by its own
    compare-and-set (which re-checks `overdue`); how many moved."""
    stmt = select(Job.id).where(Job.state == expected, overdue).limit(_SCAN_BATCH)
    moved = 0
    for job_id in session.exec(stmt).all():
        try:
            _cas(
                session,
                job_id=job_id or 0,
                expected=expected,
                to=to,
                actor="system",
                address=None,
                detail=detail,
                fields=fields,
                extra=(overdue,),
            )
            moved += 1
        except StaleState:
            continue
    return moved
