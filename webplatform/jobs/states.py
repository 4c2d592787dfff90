"""The job state machine, the one door for the job's life: every state change is a named
operation here (`approve`, `deny`, `cancel`, `expire_due`, `move`), a compare-and-set with an
audit event.

`UPDATE job SET state = :to ... WHERE id = :id AND state = :expected` decides every race in
the database, so two operators clicking at once (or two workers claiming) get one winner;
the loser gets `StaleState` naming what happened. Whether an operator may decide at all is
the decision point's (`webplatform.trust.decidability`), asked through `judge` and `enforce`.
A job comes to be through `webplatform.jobs.recording.create` (its insert is
`webplatform.jobs.calls`); a worker's claims and leases are `webplatform.jobs.leases`.
Functions take the caller's session and never commit, except `enforce` recording an expiry
(see there). Run them through a store object's door (`platform.jobs.step(...)`) so SQLite lock
waits are retried.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlmodel import Session

from webplatform.store import previews as preview_rows
from webplatform.store.approvals import add_approval
from webplatform.store.audit import AuditEntry, audit_events, record_event
from webplatform.store.audit_chain import lock_chain
from webplatform.store.clock import shared_now
from webplatform.store.heartbeats import beat, forget_heartbeat, fresh_heartbeat
from webplatform.store.models import (
    TERMINAL_STATES,
    Job,
    JobApproval,
    JobState,
)
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
    Step,
    call_detail,
    move_overdue,
    window_closed,
)
from webplatform.store.transitions import compare_and_set as _cas
from webplatform.store.transitions import fetch_job as _fetch
from webplatform.store.transitions import stale_error as _stale
from webplatform.trust.decidability import (
    Intent,
    Refusal,
    Standing,
    Verdict,
    read_decider,
    read_standing,
)
from webplatform.trust.decidability import judge as verdict_on
from webplatform.trust.signing import DecisionSigner, decision_of

__all__ = [
    "LEGAL_MOVES",
    "TERMINAL_STATES",
    "AlreadyApproved",
    "ApprovalExpired",
    "Context",
    "DigestMismatch",
    "IllegalMove",
    "Intent",
    "JobError",
    "JobNotFound",
    "NotAllowed",
    "PreviewChanged",
    "StaleState",
    "approve",
    "audit_events",
    "beat",
    "cancel",
    "count_pending",
    "deny",
    "enforce",
    "expire_due",
    "forget_heartbeat",
    "fresh_heartbeat",
    "get_job",
    "judge",
    "list_jobs",
    "move",
    "Move",
    "pending_approvals",
    "prune_finished",
]

S = JobState


class NotAllowed(JobError):
    """This operator may not decide this job: a viewer, an operator whose row does not
    verify, or the operator who asked for it when the action forbids self-approval."""


class AlreadyApproved(JobError):
    """The same operator approved this job before; another operator's approval is needed."""


class PreviewChanged(DigestMismatch):
    """The job's preview is no longer the one the operator's page showed (SPEC §20)."""


@dataclass(frozen=True)
class Context:
    """How a decision reached us: the decider's `address`, the step-up proof they gave
    (`step_up`, its description: never a secret), the `seal` their operator row must verify
    with (None: the signer's own key), the time (`now`, None: the clock hosts share,
    `webplatform.store.clock`), and the digest
    of the preview their page showed (`preview`: "" for none, None when nothing was shown;
    SPEC §20)."""

    address: str | None = None
    step_up: str | None = None
    seal: RowSeal | None = None
    now: datetime | None = None
    preview: str | None = None


def move(*, session: Session, job_id: int, step: Step, **fields: Any) -> Job:
    """Move job `job_id` as `step` says, setting `fields`, and audit it.

    Raises IllegalMove if LEGAL_MOVES forbids it, JobNotFound, or StaleState if the job
    was not in `step.expected` any more (someone else moved it first).
    """
    return _cas(session, Move(job_id, step, fields))


def judge(
    *, session: Session, job: Job, operator: str, intent: Intent, context: Context
) -> tuple[Standing, Verdict]:
    """The decision point's verdict (`webplatform.trust.decidability`) on `operator`
    deciding `job` now, and the job's standing it was judged on, as `session` reads them."""
    standing = read_standing(session, job, context.seal)
    decider = read_decider(session, operator, context.seal)
    now = context.now or standing.read_at or shared_now(session)
    return standing, verdict_on(standing, decider, intent=intent, now=now)


def enforce(
    *, session: Session, job: Job, verdict: Verdict, operator: str, address: str | None
) -> None:
    """Raise the refusal `verdict` holds, if any: StaleState, ApprovalExpired, NotAllowed or
    AlreadyApproved. An expiry is recorded first (the job moves to `expired`) and committed,
    so the refusal sticks although the caller's transaction ends with the exception."""
    if verdict.may_decide:
        return
    if verdict.refusal is Refusal.not_pending:
        raise _stale(job, S.pending_approval, unsigned=verdict.unsigned)
    if verdict.expired:
        late = f"approval by {operator} came after expiry; refused"
        step = Step(S.pending_approval, S.expired, "system", address=address, detail=late)
        move(session=session, job_id=job.id or 0, step=step)
        session.commit()
        raise ApprovalExpired(job.id or 0)
    if verdict.refusal is Refusal.already_given:
        raise AlreadyApproved(verdict.reason)
    raise NotAllowed(verdict.reason)


def approve(
    *,
    session: Session,
    job_id: int,
    operator: str,
    digest: str,
    signer: DecisionSigner,
    context: Context = Context(),
) -> Job:
    """Approve a pending job for exactly the call the operator saw (`digest`), signed by the
    dashboard's decision key (a worker runs nothing whose approval does not verify). The
    operator's row must verify with `context.seal` (default: the signer's own key).

    `context.preview` is the digest of the preview the operator's page showed ("" for none);
    the signed decision binds it (SPEC §20), and None binds the preview as stored now (a
    caller that shows none: the run form's operator, a test).

    Raises DigestMismatch if the job's digest differs, PreviewChanged if its preview is not
    the one shown, and what `enforce` raises when the decision point refuses (StaleState;
    ApprovalExpired, the expiry committed; NotAllowed; AlreadyApproved).
    """
    now = context.now or shared_now(session)
    seal = context.seal or signer.row_seal()
    context = replace(context, now=now, seal=seal)
    # Approvals of one job queue behind each other here, so of two operators giving the last
    # two approvals at once both are counted and exactly one moves the job on.
    lock_chain(session)
    job = _fetch(session, job_id)
    if job.state == S.pending_approval and digest != job.args_digest:
        raise DigestMismatch(
            f"job {job_id} is not the call you reviewed (digest differs); reload and decide again"
        )
    shown = _preview_shown(session, job, context.preview)
    standing, verdict = judge(
        session=session, job=job, operator=operator, intent=Intent.approve, context=context
    )
    enforce(session=session, job=job, verdict=verdict, operator=operator, address=context.address)
    add_approval(
        session=session,
        row=JobApproval(
            job_id=job_id,
            operator=operator,
            digest=digest,
            at=now,
            step_up=context.step_up,
            address=context.address,
        ),
        seal=seal,
    )
    return _counted(session, job, (*standing.given, operator), signer, context, shown)


def _preview_shown(session: Session, job: Job, preview: str | None) -> str | None:
    """The digest of job's preview the approval binds: the stored one, which must be the one
    the operator's page showed (`preview`; None: whatever is stored), else PreviewChanged."""
    row = preview_rows.preview_of(session=session, job_id=job.id or 0)
    stored = None if row is None else row.digest
    if preview is not None and job.state == S.pending_approval and preview != (stored or ""):
        raise PreviewChanged(
            f"job {job.id}'s preview changed since your page showed it (or your page showed "
            "none): review what it would do now, then decide again"
        )
    return stored


def _counted(
    session: Session,
    job: Job,
    given: tuple[str, ...],
    signer: DecisionSigner,
    context: Context,
    preview: str | None = None,
) -> Job:
    """The job once `given` approved it: still pending (an audit event says how many of how
    many), or, with the last approval, one compare-and-set signed over every approver and
    the digest of the preview approved (`preview`)."""
    now = context.now or shared_now(session)
    detail = call_detail(job) + (f"; {context.step_up}" if context.step_up else "")
    if len(given) < job.approvals_required:
        record_event(
            session,
            AuditEntry(
                actor=given[-1],
                event="approval",
                job_id=job.id,
                detail=f"{detail}; {len(given)} of {job.approvals_required} approvals",
                address=context.address,
            ),
        )
        return job
    fields: dict[str, Any] = {
        "decided_by": ", ".join(given),
        "decided_at": now,
        "decided_from": context.address,
        "preview_digest": preview,
    }
    fields["decision_signature"] = _signed(signer, job, "approved", fields)
    if job.approvals_required > 1:
        detail += f"; approved by {', '.join(given)}"
    step = Step(S.pending_approval, S.approved, given[-1], address=context.address, detail=detail)
    return move(session=session, job_id=job.id or 0, step=step, **fields)


def deny(
    *,
    session: Session,
    job_id: int,
    operator: str,
    reason: str | None = None,
    signer: DecisionSigner | None = None,
    context: Context = Context(),
) -> Job:
    """Refuse a pending job; `reason` is passed on to the requesting agent. The dashboard
    signs denials too (`signer`), so the record of who refused what is as strong; the
    operator's row must verify with `context.seal` (default: the signer's own key)."""
    now = context.now or shared_now(session)
    if context.seal is None and signer is not None:
        context = replace(context, seal=signer.row_seal())
    job = _fetch(session, job_id)
    _, verdict = judge(
        session=session, job=job, operator=operator, intent=Intent.deny, context=context
    )
    enforce(session=session, job=job, verdict=verdict, operator=operator, address=context.address)
    fields = {
        "decided_by": operator,
        "decided_at": now,
        "decided_from": context.address,
        "reason": reason,
        "finished_at": now,
    }
    if signer is not None:
        fields["decision_signature"] = _signed(signer, job, "denied", fields)
    why = reason or call_detail(job)
    step = Step(S.pending_approval, S.denied, operator, address=context.address, detail=why)
    return move(session=session, job_id=job_id, step=step, **fields)


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
    fields: dict[str, Any] = {"reason": reason, "finished_at": shared_now(session)}
    if job.state == S.pending_approval:
        fields |= {
            "decided_by": actor,
            "decided_at": fields["finished_at"],
            "decided_from": address,
        }
    step = Step(job.state, S.cancelled, actor, address=address, detail=reason)
    return move(session=session, job_id=job_id, step=step, **fields)


def _signed(signer: DecisionSigner, job: Job, decision: str, fields: dict[str, Any]) -> str:
    """The signature over `decision` as `job` will carry it once `fields` (its deciders and
    time) are set: the same statement a worker rebuilds from the row to verify it."""
    signed = decision_of(Job.model_validate(job.model_dump() | fields), decision)
    assert signed is not None  # `fields` name the deciders and the time
    return signer.sign(signed)


def expire_due(*, session: Session, now: datetime | None = None) -> int:
    """Move every pending job whose approval window has closed to `expired`; how many."""
    now = now or shared_now(session)
    # A job decided between the scan and its move keeps that decision.
    return move_overdue(
        session,
        expected=S.pending_approval,
        to=S.expired,
        overdue=window_closed(now),
        detail="nobody decided in time",
        fields={"finished_at": now},
    )
