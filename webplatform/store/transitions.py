"""The compare-and-set at the heart of the job state machine, and its refusals.

`webplatform.jobs.states` builds every operation (approve, claim, finish, ...) on `compare_and_set`
and re-exports LEGAL_MOVES and the exceptions; this module is only the SQL of a move.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Update, bindparam
from sqlalchemy.orm.util import identity_key
from sqlmodel import Session, col, select, update

from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.audit_chain import lock_chain
from webplatform.store.models import TERMINAL_STATES, Job, JobState, loaded_job, utcnow
from webplatform.store.notify import notify_job
from webplatform.telemetry import metrics

S = JobState
_SCAN_BATCH = 500
_JOB_COLUMNS = tuple(Job.__table__.c)  # type: ignore[attr-defined]
LEGAL_MOVES: dict[JobState, frozenset[JobState]] = {
    S.pending_approval: frozenset({S.approved, S.denied, S.expired, S.cancelled}),
    # An approved job nobody has claimed yet stays approved: expiry is only for decisions.
    S.approved: frozenset({S.running, S.cancelled}),
    # Back to waiting before its tool started: the preview, run again by the worker that
    # claimed it, no longer says what was approved (SPEC §20; `webplatform.jobs.recheck`).
    # Back to approved before its tool started: this host's ledger could not record the
    # decision (a full disk, a worker stopped holding its lock); nothing ran, nothing is spent.
    S.running: frozenset(
        {S.succeeded, S.failed, S.timed_out, S.cancelled, S.lost, S.pending_approval, S.approved}
    ),
    **{state: frozenset() for state in TERMINAL_STATES},
}
# Columns a move may set besides `state` and `updated_at`; the call itself is immutable.
_MOVABLE = frozenset(
    {
        "expires_at",
        "decided_by",
        "decided_at",
        "decided_from",
        "reason",
        "worker_id",
        "lease_expires_at",
        "started_at",
        "finished_at",
        "exit_code",
        "result_json",
        "stdout",
        "stderr",
        "error",
        "note",
        "decision_signature",
        "preview_digest",
    }
)
# What a page or an error says of a job whose row claims an approval that no valid signature
# covers (a SQL `UPDATE`, say; `webplatform.trust.claims`), instead of "approved by NAME".
UNSIGNED_APPROVAL = "marked approved in the database, without a valid signature"
_EVENT_FOR = {
    S.running: "claimed",
    S.succeeded: "finished",
    S.failed: "finished",
    S.timed_out: "finished",
}


class JobError(Exception):
    """Base of every refusal from the state machine."""


class IllegalMove(JobError):
    """A move LEGAL_MOVES does not allow: a programming error or a forged request."""


class JobNotFound(JobError):
    """No job has that id."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} does not exist")
        self.job_id = job_id


class StaleState(JobError):
    """The compare-and-set lost: the job was no longer in the expected state (or owner)."""

    def __init__(
        self,
        *,
        job_id: int,
        expected: JobState,
        actual: JobState,
        decided_by: str | None,
        message: str | None = None,
        unsigned: bool = False,
    ) -> None:
        if unsigned:  # its `decided_by` names nobody who approved it: never repeated
            decided_by = None
            message = message or (
                f"job {job_id} was {UNSIGNED_APPROVAL} (no operator approved it here); it is "
                f"{actual.value} and will not run"
            )
        if message is None:
            message = f"job {job_id} is already {actual.value}"
            if decided_by and actual in (S.approved, S.denied, S.cancelled):
                message += f" by {decided_by}"
            elif decided_by:
                message += f" (decided by {decided_by})"
        super().__init__(message)
        self.job_id = job_id
        self.expected = expected
        self.actual = actual
        self.decided_by = decided_by
        self.unsigned = unsigned


class DigestMismatch(JobError):
    """The arguments are not the ones the digest (and so the approval) was made for."""


class ApprovalExpired(JobError):
    """The approval came after the job's approval window closed; the job is now expired."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} expired before it was approved; ask for it again")
        self.job_id = job_id


def fetch_job(session: Session, job_id: int) -> Job:
    """The job as the database has it now (not a stale copy), or JobNotFound."""
    job = session.get(Job, job_id, populate_existing=True)
    if job is None:
        raise JobNotFound(job_id)
    return job


def stale_error(
    job: Job, expected: JobState, message: str | None = None, *, unsigned: bool = False
) -> StaleState:
    """The StaleState for a job found in another state than `expected` (`unsigned`: its row
    claims an approval whose signature does not verify, so no approver is named)."""
    return StaleState(
        job_id=job.id or 0,
        expected=expected,
        actual=job.state,
        decided_by=job.decided_by,
        message=message,
        unsigned=unsigned,
    )


@dataclass(frozen=True)
class Step:
    """One state move as the audit trail keeps it: from `expected` to `to`, by `actor`."""

    expected: JobState
    to: JobState
    actor: str
    address: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Move:
    """One compare-and-set: job `job_id` moved as `step` says (audited as done by its actor,
    from its address, with its detail; as `event` when the state's usual verb does not fit),
    setting `fields`. With `owner`, only while that worker holds the job; with `extra`, only
    while those conditions hold too."""

    job_id: int
    step: Step
    fields: dict[str, Any]
    owner: str | None = None
    extra: tuple[ColumnElement[bool], ...] = ()
    event: str | None = None


def compare_and_set(session: Session, move: Move) -> Job:
    """`UPDATE job SET state=:to, ... WHERE id=:id AND state=:expected [AND worker_id=:owner]
    [AND extra]`, audited.

    Raises IllegalMove, JobNotFound, or StaleState when the row did not match (another
    actor moved it first); the audit event is written in the same transaction.
    """
    step, job_id = move.step, move.job_id
    expected, to = step.expected, step.to
    if to not in LEGAL_MOVES[expected]:
        raise IllegalMove(f"a job cannot move from {expected.value} to {to.value}")
    unknown = set(move.fields) - _MOVABLE
    if unknown:
        raise TypeError(f"a move cannot set {sorted(unknown)}")
    # The audit chain's lock before the row's, in every transaction: no lock-order deadlock.
    lock_chain(session)
    row = session.connection().execute(*_cas_update(move)).first()
    if row is None:
        job = fetch_job(session, job_id)
        raise stale_error(
            job, expected, None if job.state != expected else f"job {job_id} moved on"
        )
    if identity_key(Job, job_id) in session.identity_map:
        job = fetch_job(session, job_id)  # the copy this transaction already holds, updated
    else:  # the row as the UPDATE left it, without a second read through the ORM
        job = loaded_job(dict(row._mapping))
    entry = AuditEntry(
        actor=step.actor,
        event=move.event or _EVENT_FOR.get(to, to.value),
        job_id=job_id,
        from_state=expected.value,
        to_state=to.value,
        detail=step.detail,
        address=step.address,
    )
    record_event(session, entry)
    notify_job(session, job_id, to)
    if metrics.recording():
        _counted(expected, to, job)
    return job


def _counted(expected: JobState, to: JobState, job: Job) -> None:
    """A decision on a queued call, and a job's end, in this process's metrics."""
    if expected is JobState.pending_approval and to in (JobState.approved, JobState.denied):
        metrics.approval_decided(to.value, (utcnow() - job.created_at).total_seconds())
    if to in TERMINAL_STATES:
        metrics.job_finished(to.value)


def _cas_update(move: Move) -> tuple[Update, dict[str, Any]]:
    """The compare-and-set's statement and the values bound to it."""
    # A Core UPDATE with the new values bound at execution (the SET clause): the ORM's bulk
    # update machinery and per-value coercion cost more than the statement itself.
    stmt = _cas_statement(owned=move.owner is not None)
    if move.extra:
        stmt = stmt.where(*move.extra)
    values = {
        "cas_id": move.job_id,
        "cas_expected": move.step.expected,
        "state": move.step.to,
        "updated_at": utcnow(),
    }
    if move.owner is not None:
        values["cas_owner"] = move.owner
    values.update(move.fields)
    return stmt, values


@functools.cache
def _cas_statement(*, owned: bool) -> Update:
    """The compare-and-set's UPDATE, built once: its values and conditions are bound per call
    (the statement's construction and cache key cost more than running it)."""
    where = [col(Job.id) == bindparam("cas_id"), col(Job.state) == bindparam("cas_expected")]
    if owned:
        where.append(col(Job.worker_id) == bindparam("cas_owner"))
    return update(Job).where(*where).returning(*_JOB_COLUMNS)


def call_detail(job: Job) -> str:
    """`kind name action sha256:digest`: the exact call, as audit events name it."""
    # Decision events outlive the job row, so they name the exact call themselves.
    return f"{job.kind} {job.name} {job.action} sha256:{job.args_digest}"


def window_closed(now: datetime) -> ColumnElement[bool]:
    """A pending job's approval window has closed by `now` (what `expire_due` moves)."""
    return col(Job.expires_at) <= now


def move_overdue(
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
            compare_and_set(
                session,
                Move(
                    job_id or 0,
                    Step(expected, to, "system", detail=detail),
                    fields,
                    extra=(overdue,),
                ),
            )
            moved += 1
        except StaleState:
            continue
    return moved
