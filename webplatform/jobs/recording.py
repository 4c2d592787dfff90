"""Recording a validated call as a job: who asked, the approval policy it keeps, the
admission check and the run form operator's first approval, all in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlmodel import Session

from webplatform.canonical import args_digest
from webplatform.jobs import admission, calls, previews
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Answer
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Actor, Platform
from webplatform.registry.model import ActionSpec, ToolSpec
from webplatform.store.agents import agent_owner
from webplatform.store.models import Job
from webplatform.trust import signing
from webplatform.trust.policy import policy_for
from webplatform.trust.stepup import StepUp


def queue_call(
    *,
    platform: Platform,
    spec: ToolSpec,
    action: ActionSpec,
    args: dict[str, Any],
    actor: Actor,
    step_up: StepUp | None,
    reason: str | None,
) -> Answer:
    """Queue an irreversible call under its approval policy; with the operator's `step_up`
    it starts approved by them when one approval is enough and they may give it, and
    otherwise waits, their approval counted as the first if they may give one. A requester
    with `AAT_MAX_PENDING` calls already waiting gets a `Refusal` (`refused`)."""
    policy = policy_for(platform.settings, action)
    at_once = step_up is not None and policy.approvals == 1 and policy.self_approval
    start: calls.Start
    after: Callable[[Session, Job], None] | None = None
    if step_up is not None and at_once:
        assert actor.operator is not None  # checked by request_run
        # The dashboard operator's run is their approval: signed like one from the queue.
        start = calls.Approved(
            decided_by=actor.operator,
            signer=signing.signer_for(platform.settings.home),
            step_up=step_up.describe(),
        )
    else:
        start = calls.Waiting(ttl_s=platform.settings.approval_ttl_s)
        if step_up is not None and policy.self_approval and actor.operator:
            after = _first_approval(platform, actor, step_up)
    # A call that waits for an operator gets its preview (SPEC §16); one approved at once
    # has nobody left to show it to.
    preview = None if at_once else previews.preview_action(spec, action)
    job_id = record_job(
        platform=platform,
        spec=spec,
        action=action,
        stored_args=args,
        actor=actor,
        irreversible=True,
        start=start,
        refuse=None
        if step_up is not None
        else admission.over_pending_limit(
            settings=platform.settings, actor=actor, tool=spec.name, action=action.name
        ),
        policy={
            "approvals_required": policy.approvals,
            "self_approval": policy.self_approval,
            "agent_reason": reason,
        },
        after=_then(after, _pending_preview(preview)),
    )
    if preview is not None:  # the row is committed: the answer never waits for it
        previews.start(platform, spec, preview, args, job_id)
    return job_answer(platform=platform, job_id=job_id)


AfterFn = Callable[[Session, Job], None]


def _pending_preview(preview: ActionSpec | None) -> AfterFn | None:
    """Writes the job's `pending` preview row, in the transaction that queues the job."""
    if preview is None:
        return None
    return lambda session, job: previews.add_pending(session, job.id or 0, preview)


def _then(first: AfterFn | None, second: AfterFn | None) -> AfterFn | None:
    """Both callbacks, in order (either may be None)."""
    if first is None or second is None:
        return first or second

    def both(session: Session, job: Job) -> None:
        first(session, job)
        second(session, job)

    return both


def _first_approval(
    platform: Platform, actor: Actor, step_up: StepUp
) -> Callable[[Session, Job], None]:
    """The run form operator's approval, given in the transaction that queues the job."""
    signer = signing.signer_for(platform.settings.home)
    operator = actor.operator or ""

    def approve(session: Session, job: Job) -> None:
        jobs.approve(
            session=session,
            job_id=job.id or 0,
            operator=operator,
            digest=job.args_digest,
            signer=signer,
            address=actor.address,
            step_up=step_up.describe(),
        )

    return approve


def record_job(
    *,
    platform: Platform,
    spec: ToolSpec,
    action: ActionSpec,
    stored_args: dict[str, Any],
    actor: Actor,
    irreversible: bool,
    start: calls.Start,
    refuse: Callable[[Session], None] | None = None,
    policy: dict[str, Any] | None = None,
    after: Callable[[Session, Job], None] | None = None,
) -> int:
    """Insert the job row (arguments as stored: secrets masked) and return its id.

    `refuse`, run in the same transaction first, may raise (`Refusal`) to insert nothing.
    `policy` (irreversible calls) is the approval policy the job keeps; the operator who
    asked is recorded with it (the run form's, or the owner of the agent token that asked).
    `after` runs in the same transaction once the row exists.
    """
    call = calls.Call(
        kind=spec.kind,
        name=spec.name,
        action=action.name,
        args=stored_args,
        digest=args_digest(kind=spec.kind, name=spec.name, action=action.name, args=stored_args),
        irreversible=irreversible,
        surface=actor.surface,
        client=actor.client,
        requested_by=actor.operator or actor.agent or actor.client,
        requester_proof=actor.proof,
        address=actor.address,
    )

    def insert(session: Session) -> int:
        if refuse is not None:
            refuse(session)
        recorded = call
        if policy is not None:
            asker = actor.operator or (
                agent_owner(session=session, name=actor.agent) if actor.agent else None
            )
            recorded = replace(call, asked_by_operator=asker, **policy)
        job = calls.create_job(session=session, call=recorded, start=start)
        assert job.id is not None  # flushed by create_job
        if after is not None:
            after(session, job)
        return job.id

    return platform.transact(insert)
