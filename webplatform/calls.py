"""Recording a new job: a requested call becomes a row in its first state, with audit events."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlmodel import Session

from webplatform.canonical import args_digest, canonical_json
from webplatform.signing import DecisionSigner, decision_of
from webplatform.store.audit import record_event
from webplatform.store.models import Job, JobState, Surface, utcnow
from webplatform.store.notify import notify_job
from webplatform.store.transitions import DigestMismatch, IllegalMove, call_detail

S = JobState
INITIAL_STATES = frozenset({S.pending_approval, S.approved, S.running})


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
    step_up: str | None = None,
    signer: DecisionSigner | None = None,
) -> Job:
    """Record a new job in `state` and audit it.

    - `pending_approval`: waits for an operator; expires after `ttl_s` (None: never).
    - `approved`: an operator ran it from the dashboard after confirming (`decided_by`,
      with `step_up` naming the proof they gave, for the audit trail); the decision is
      signed with the dashboard's key (`signer`).
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
        if not decided_by or signer is None:
            raise ValueError(
                "an approved job needs decided_by (the operator who ran it) and the "
                "dashboard's signer"
            )
        job.decided_by, job.decided_at, job.decided_from = decided_by, now, address
    if state == S.running:
        if not worker_id or lease_s is None:
            raise ValueError("a running job needs worker_id and lease_s")
        job.worker_id, job.started_at = worker_id, now
        job.lease_expires_at = now + timedelta(seconds=lease_s)
    session.add(job)
    session.flush()
    if state == S.approved:
        # The signature covers the job id, known only now.
        decision = decision_of(job, "approved")
        assert signer is not None and decision is not None  # checked above
        job.decision_signature = signer.sign(decision)
        session.flush()
    actor = decided_by or requested_by or client or surface.value
    job_id = job.id
    record_event(
        session=session,
        actor=actor,
        event="created",
        job_id=job_id,
        to_state=state.value,
        detail=call_detail(job),
        address=address,
    )
    if state == S.approved:
        record_event(
            session=session,
            actor=actor,
            event="approved",
            job_id=job_id,
            to_state=state.value,
            detail=call_detail(job) + (f"; {step_up}" if step_up else ""),
            address=address,
        )
    notify_job(session, job.id or 0, state)
    return job
