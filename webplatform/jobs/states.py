"""The job state machine: every state change is a compare-and-set with an audit event.

`UPDATE job SET state = :to ... WHERE id = :id AND state = :expected` decides every race in
the database, so two operators clicking at once (or two workers claiming) get one winner;
the loser gets `StaleState` naming what happened. Creating a job is `webplatform.jobs.calls`;
a worker's claims and leases are `webplatform.jobs.leases`. Functions take the caller's session and
never commit, except `approve` recording an expiry (see there). Run them through
`webplatform.store.transact(engine, lambda s: ...)` so SQLite lock waits are retried.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Session, col

from webplatform.store.approvals import add_approval, approvals_of
from webplatform.store.audit import AuditEntry, audit_events, record_event
from webplatform.store.audit_chain import lock_chain
from webplatform.store.heartbeats import beat, forget_heartbeat, fresh_heartbeat
from webplatform.store.models import (
    TERMINAL_STATES,
    Job,
    JobApproval,
    JobState,
    utcnow,
)
from webplatform.store.operators import DECIDING_ROLES, OperatorError, decider_role
from webplatform.store.queries import (
    count_pending,
    get_job,
    list_jobs,
    pending_approvals,
    prune_finished,
)
from webplatform.store.seals import RowSeal
from webplatform.store.transitions import (
    LEGAL_MOVES,
    ApprovalExpired,
    DigestMismatch,
    IllegalMove,
    JobError,
    JobNotFound,
    Move,
    StaleState,
    call_detail,
    move_overdue,
)
from webplatform.store.transitions import compare_and_set as _cas
from webplatform.store.transitions import fetch_job as _fetch
from webplatform.store.transitions import stale_error as _stale
from webplatform.trust.signing import Decision, DecisionSigner

__all__ = [
    "LEGAL_MOVES",
    "TERMINAL_STATES",
    "AlreadyApproved",
    "ApprovalExpired",
    "DigestMismatch",
    "IllegalMove",
    "JobError",
    "JobNotFound",
    "NotAllowed",
    "StaleState",
    "approve",
    "audit_events",
    "beat",
    "cancel",
    "count_pending",
    "deny",
    "expire_due",
    "forget_heartbeat",
    "fresh_heartbeat",
    "get_job",
    "list_jobs",
    "move",
    "pending_approvals",
    "prune_finished",
]

S = JobState


class NotAllowed(JobError):
    """This operator may not decide this job: a viewer, or the operator who asked for it
    when the action forbids self-approval."""


class AlreadyApproved(JobError):
    """The same operator approved this job before; another operator's approval is needed."""


def check_may_decide(
    session: Session, job: Job, operator: str, *, approving: bool, seal: RowSeal | None
) -> None:
    """Raise NotAllowed when `operator` may not decide `job` (their role, a row whose
    signature does not verify, or self-approval)."""
    try:
        # No row: not a dashboard operator (the dashboard only passes logged-in ones, whose
        # sessions end when they are removed); such callers are this package's own and tests.
        role = decider_role(session=session, name=operator, seal=seal) if seal else None
    except OperatorError as exc:
        raise NotAllowed(str(exc)) from None
    if role is not None and role not in DECIDING_ROLES:
        raise NotAllowed(
            f"{operator} is a {role}: viewers see every call and decide "
            "none; an admin can change that on their account page"
        )
    if approving and not job.self_approval and operator == job.asked_by_operator:
        raise NotAllowed(
            f"you asked for job {job.id}, and {job.name} {job.action} may not be approved by "
            "the operator who asked: another operator must approve it"
        )


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
        Move(
            job_id=job_id,
            expected=expected,
            to=to,
            actor=actor,
            address=address,
            detail=detail,
            fields=fields,
        ),
    )


def approve(
    *,
    session: Session,
    job_id: int,
    operator: str,
    digest: str,
    signer: DecisionSigner,
    address: str | None = None,
    now: datetime | None = None,
    step_up: str | None = None,
    seal: RowSeal | None = None,
) -> Job:
    """Approve a pending job for exactly the call the operator saw (`digest`), signed by the
    dashboard's decision key (a worker runs nothing whose approval does not verify);
    `step_up` names the proof the operator gave (recorded in the audit event, never a secret).
    The operator's row must verify with `seal` (default: the signer's own key).

    Raises DigestMismatch if the job's digest differs, StaleState if it was already
    decided, and ApprovalExpired if its window has closed: the job is then moved to
    `expired` and that move is committed before raising, so the refusal sticks.
    """
    now = now or utcnow()
    # Approvals of one job queue behind each other here, so of two operators giving the last
    # two approvals at once both are counted and exactly one moves the job on.
    lock_chain(session)
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
            Move(
                job_id=job_id,
                expected=S.pending_approval,
                to=S.expired,
                actor="system",
                address=address,
                fields={},
                detail=f"approval by {operator} came after expiry; refused",
            ),
        )
        session.commit()
        raise ApprovalExpired(job_id)
    check_may_decide(session, job, operator, approving=True, seal=seal or signer.row_seal())
    given = [a.operator for a in approvals_of(session=session, job_id=job_id)]
    if operator in given:
        left = job.approvals_required - len(given)
        raise AlreadyApproved(
            f"you already approved job {job_id}; it needs {left} more approval(s) from "
            "other operators"
        )
    approval = JobApproval(
        job_id=job_id, operator=operator, digest=digest, step_up=step_up, address=address, at=now
    )
    add_approval(session=session, row=approval)
    given.append(operator)
    detail = call_detail(job) + (f"; {step_up}" if step_up else "")
    if len(given) < job.approvals_required:
        record_event(
            session,
            AuditEntry(
                actor=operator,
                event="approval",
                job_id=job_id,
                detail=f"{detail}; {len(given)} of {job.approvals_required} approvals",
                address=address,
            ),
        )
        return job
    # The last approval: one compare-and-set, signed over every approving operator.
    return _cas(
        session,
        Move(
            job_id=job_id,
            expected=S.pending_approval,
            to=S.approved,
            actor=operator,
            address=address,
            detail=detail
            + (f"; approved by {', '.join(given)}" if job.approvals_required > 1 else ""),
            fields={
                "decided_by": ", ".join(given),
                "decided_at": now,
                "decided_from": address,
                "decision_signature": signer.sign(_decision(job, "approved", tuple(given), now)),
            },
        ),
    )


def deny(
    *,
    session: Session,
    job_id: int,
    operator: str,
    reason: str | None = None,
    address: str | None = None,
    signer: DecisionSigner | None = None,
    seal: RowSeal | None = None,
) -> Job:
    """Refuse a pending job; `reason` is passed on to the requesting agent. The dashboard
    signs denials too (`signer`), so the record of who refused what is as strong."""
    now = utcnow()
    job = _fetch(session, job_id)
    if job.state == S.pending_approval:
        seal = seal or (signer.row_seal() if signer is not None else None)
        check_may_decide(session, job, operator, approving=False, seal=seal)
    fields = {
        "decided_by": operator,
        "decided_at": now,
        "decided_from": address,
        "reason": reason,
        "finished_at": now,
    }
    if signer is not None:
        fields["decision_signature"] = signer.sign(_decision(job, "denied", (operator,), now))
    return _cas(
        session,
        Move(
            job_id=job_id,
            expected=S.pending_approval,
            to=S.denied,
            actor=operator,
            address=address,
            detail=reason or call_detail(job),
            fields=fields,
        ),
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
        Move(
            job_id=job_id,
            expected=job.state,
            to=S.cancelled,
            actor=actor,
            address=address,
            detail=reason,
            fields=fields,
        ),
    )


def _decision(job: Job, decision: str, operators: tuple[str, ...], at: datetime) -> Decision:
    return Decision(
        job_id=job.id or 0,
        digest=job.args_digest,
        kind=job.kind,
        name=job.name,
        action=job.action,
        decision=decision,
        operators=operators,
        at=at,
    )


def expire_due(*, session: Session, now: datetime | None = None) -> int:
    """Move every pending job whose approval window has closed to `expired`; how many."""
    now = now or utcnow()
    # A job decided between the scan and its move keeps that decision.
    return move_overdue(
        session,
        expected=S.pending_approval,
        to=S.expired,
        overdue=col(Job.expires_at) <= now,
        detail="nobody decided in time",
        fields={"finished_at": now},
    )
