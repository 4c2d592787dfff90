"""Recording a new job: a requested call becomes a row in its first state, with audit events."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, ClassVar

from sqlmodel import Session

from webplatform.canonical import args_digest, canonical_json
from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.clock import shared_now
from webplatform.store.job_rows import insert_job, sign_new_job
from webplatform.store.models import Job, JobState, Surface, loaded_job
from webplatform.store.notify import notify_job
from webplatform.store.seals import RowSeal, seal_policy
from webplatform.store.transitions import DigestMismatch, IllegalMove, call_detail
from webplatform.trust.signing import DecisionSigner, decision_of

S = JobState


@dataclass(frozen=True)
class Call:
    """One requested call as it is recorded: what runs, with which arguments, and who asked.

    `args` are stored as given (secrets already masked) and `digest` must be
    `args_digest(kind, name, action, args)` over exactly those args, since the worker
    re-checks it from the stored row before running.
    """

    kind: str
    name: str
    action: str
    args: dict[str, Any]
    digest: str
    irreversible: bool
    surface: Surface
    client: str | None = None
    requested_by: str | None = None
    # What vouched for `requested_by` ("token", "login"); None: the client's own word.
    requester_proof: str | None = None
    address: str | None = None
    rerun_of: int | None = None
    # The pending job this call replaces, edited by an operator (its args are the edit).
    edited_from: int | None = None
    # The approval policy the job keeps (SPEC §11): how many distinct operators must
    # approve, whether the operator who asked may be one of them, and who that operator is.
    approvals_required: int = 1
    self_approval: bool = True
    asked_by_operator: str | None = None
    # Why the agent asked, in its own words.
    agent_reason: str | None = None


@dataclass(frozen=True)
class Waiting:
    """Start in `pending_approval`, waiting for an operator; expire after `ttl_s` (None: never).

    `seal` signs the job's policy columns (`webplatform.store.seals.policy_message`); a job
    recorded without one can be denied but never approved.
    """

    state: ClassVar[JobState] = JobState.pending_approval
    ttl_s: float | None = None
    seal: RowSeal | None = None


@dataclass(frozen=True)
class Approved:
    """Start `approved`: an operator ran it from the dashboard after confirming.

    `step_up` names the proof they gave, for the audit trail; the decision is signed with
    the dashboard's key (`signer`).
    """

    state: ClassVar[JobState] = JobState.approved
    decided_by: str
    signer: DecisionSigner
    step_up: str | None = None
    # Allowed by this rule (SPEC §16) rather than by `decided_by` at the dashboard.
    rule: int | None = None


@dataclass(frozen=True)
class Running:
    """Start `running`: a reversible call run inline by the requester.

    The requester must renew the lease while it runs, or the job is reaped as lost.
    """

    state: ClassVar[JobState] = JobState.running
    worker_id: str
    lease_s: float


Start = Waiting | Approved | Running
INITIAL_STATES = frozenset(start.state for start in (Waiting, Approved, Running))
# A call's fields are the job's own columns, spelled once on the model, except these three:
# `args` is stored as `args_json`, `digest` as `args_digest`, and `address` (where the call
# came from) goes to the audit trail.
_NOT_COLUMNS = frozenset({"args", "digest", "address"})
_CALL_COLUMNS = tuple(f.name for f in fields(Call) if f.name not in _NOT_COLUMNS)
assert set(_CALL_COLUMNS) <= set(Job.model_fields), "a Call field that is no Job column"


def job_values(call: Call, state: JobState, now: datetime) -> dict[str, Any]:
    """The columns of the job `call` becomes in `state`, recorded at `now` (before what its
    first state sets: who decided, when it started)."""
    values: dict[str, Any] = {name: getattr(call, name) for name in _CALL_COLUMNS}
    return values | {
        "args_json": canonical_json(call.args),
        "args_digest": call.digest,
        "surface": Surface(call.surface),  # a plain string is accepted too
        "state": state,
        "created_at": now,
        "updated_at": now,
    }


def create_job(*, session: Session, call: Call, start: Start) -> Job:
    """Record `call` as a new job in its first state (`start`) and audit it."""
    _check(call, start)
    # The window, the decision's time and the lease are read against the clock hosts share.
    now = shared_now(session)
    values = job_values(call, start.state, now) | _started(start, now, call.address)
    # The job handed back is built from the same values, outside the session.
    job = loaded_job({**values, "id": insert_job(session, values)})
    signed = _signatures(job, start)
    if signed:  # the signatures cover the job id, known only now
        sign_new_job(session, job.id or 0, signed)
    _audit_creation(session, job, call, start)
    notify_job(session, job.id or 0, start.state)
    return job


def _signatures(job: Job, start: Start) -> dict[str, str]:
    """The signatures a new job carries, set on `job` too: its policy's, when it waits for an
    approval or starts with one (`webplatform.store.seals.policy_message`), and the decision's
    when it starts approved."""
    if isinstance(start, Running):
        return {}  # a reversible call, run at once: nobody decides it
    seal = start.signer.row_seal() if isinstance(start, Approved) else start.seal
    if seal is None:
        return {}
    job.policy_signature = seal_policy(seal, job)
    signed = {"policy_signature": job.policy_signature}
    if isinstance(start, Approved):
        decision = decision_of(job, "approved")
        assert decision is not None  # decided_by and decided_at are set by _started
        job.decision_signature = signed["decision_signature"] = start.signer.sign(decision)
    return signed


def _check(call: Call, start: Start) -> None:
    """Refuse a call that cannot be recorded as asked (a programming error, not a user's)."""
    if call.kind not in ("tool", "agent"):
        raise ValueError(f"kind must be 'tool' or 'agent', not {call.kind!r}")
    if call.irreversible and isinstance(start, Running):
        raise IllegalMove("an irreversible job cannot start running: it needs an approval")
    digest = args_digest(kind=call.kind, name=call.name, action=call.action, args=call.args)
    if call.digest != digest:
        raise DigestMismatch("digest is not args_digest(kind, name, action, args) of these args")
    if isinstance(start, Approved) and not start.decided_by:
        raise ValueError("an approved job needs decided_by (the operator who ran it)")
    if isinstance(start, Running) and not start.worker_id:
        raise ValueError("a running job needs worker_id and lease_s")


def _started(start: Start, now: datetime, address: str | None) -> dict[str, Any]:
    """The columns a job's first state sets: its approval window, its approver, its lease."""
    if isinstance(start, Waiting):
        ttl = start.ttl_s
        return {} if ttl is None else {"expires_at": now + timedelta(seconds=ttl)}
    if isinstance(start, Approved):
        decided = {"decided_by": start.decided_by, "decided_at": now, "decided_from": address}
        return decided | ({"allowed_by_rule": start.rule} if start.rule is not None else {})
    return {
        "worker_id": start.worker_id,
        "started_at": now,
        "lease_expires_at": now + timedelta(seconds=start.lease_s),
    }


def _audit_creation(session: Session, job: Job, call: Call, start: Start) -> None:
    """The job's first audit event, and its approval when it starts approved."""
    decided_by = start.decided_by if isinstance(start, Approved) else None
    actor = decided_by or call.requested_by or call.client or job.surface.value
    events = [("created", call_detail(job))]
    if isinstance(start, Approved):
        step_up = f"; {start.step_up}" if start.step_up else ""
        events.append(("approved", call_detail(job) + step_up))
    for event, detail in events:
        record_event(
            session,
            AuditEntry(
                actor=actor,
                event=event,
                job_id=job.id,
                to_state=start.state.value,
                detail=detail,
                address=call.address,
            ),
        )
