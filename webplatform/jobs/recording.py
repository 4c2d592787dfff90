"""Recording a validated call as a job: who asked, the approval policy it keeps, the
admission check and the run form operator's first approval, all in one transaction.

`create` is the one path by which a job row comes to be, for every surface's call and for
an operator's edit alike (`webplatform.jobs.edits`); `calls.create_job` is its insert.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
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
from webplatform.store.models import Job, JobState, utcnow
from webplatform.trust import signing
from webplatform.trust.decidability import Intent, Standing, Verdict, judge, read_decider
from webplatform.trust.policy import Policy as ActionPolicy
from webplatform.trust.policy import policy_for
from webplatform.trust.signing import DecisionSigner
from webplatform.trust.stepup import StepUp

# Run in the transaction that records a job: `Refuse` first (raises `Refusal` to record
# nothing), `After` once the row exists (an approval, a preview row, an audit event).
Refuse = Callable[[Session], None]
After = Callable[[Session, Job], None]


@dataclass(frozen=True)
class Asked:
    """A validated call as its requester asked for it: the action, the arguments as they are
    stored (secrets masked), who asked, and whether it needs an operator."""

    spec: ToolSpec
    action: ActionSpec
    args: dict[str, Any]
    actor: Actor
    irreversible: bool = False


@dataclass(frozen=True)
class Policy:
    """The approval policy an irreversible job keeps (SPEC §11), and the agent's reason."""

    approvals_required: int = 1
    self_approval: bool = True
    agent_reason: str | None = None


@dataclass(frozen=True)
class Recording:
    """How a call becomes a row: its first state, and what runs in the same transaction."""

    start: calls.Start
    refuse: Refuse | None = None
    after: tuple[After, ...] = ()


def create(session: Session, call: calls.Call, how: Recording) -> Job:
    """The one path by which a job row comes to be: `how.refuse` may raise `Refusal` (no
    row then), then the row in its first state, then each of `how.after`."""
    if how.refuse is not None:
        how.refuse(session)
    job = calls.create_job(session=session, call=call, start=how.start)
    assert job.id is not None  # flushed by create_job
    for after in how.after:
        after(session, job)
    return job


def queue_call(
    *, platform: Platform, asked: Asked, step_up: StepUp | None, reason: str | None
) -> Answer:
    """Queue an irreversible call under its approval policy; with the operator's `step_up`
    it starts approved by them when one approval is enough and they may give it, and
    otherwise waits, their approval counted as the first if they may give one. A requester
    with `AAT_MAX_PENDING` calls already waiting gets a `Refusal` (`refused`)."""
    spec, action, actor = asked.spec, asked.action, asked.actor
    policy = policy_for(platform.settings, action)
    verdict = None if step_up is None else _own_approval(platform, asked, policy)
    # The operator's approval counts only as the decision point judges it; it starts the
    # run at once only when no other approval is still needed.
    counts = verdict is not None and verdict.may_decide
    at_once = counts and verdict is not None and verdict.still_needed == 1
    how = _queued(platform, actor, step_up if counts else None, at_once)
    if step_up is None:
        refuse = admission.over_pending_limit(
            settings=platform.settings, actor=actor, tool=spec.name, action=action.name
        )
        how = replace(how, refuse=refuse)
    # A call that waits for an operator gets its preview (SPEC §16); one approved at once
    # has nobody left to show it to.
    preview = None if at_once else previews.preview_action(spec, action)
    if preview is not None:
        how = replace(how, after=(*how.after, pending_preview(preview)))
    job_id = record_job(
        platform=platform,
        asked=replace(asked, irreversible=True),
        how=how,
        policy=Policy(policy.approvals, policy.self_approval, reason),
    )
    if preview is not None:  # the row is committed: the answer never waits for it
        previews.start(platform, spec, preview, asked.args, job_id)
    return job_answer(platform=platform, job_id=job_id)


def _own_approval(platform: Platform, asked: Asked, policy: ActionPolicy) -> Verdict | None:
    """`trust.decidability`'s verdict on the run form's operator approving the call they
    ask for, as its job will stand once recorded (their role, their row's signature, the
    action's self-approval and approvals still needed); None without an operator."""
    operator = asked.actor.operator
    if not operator:
        return None
    decider = platform.operators.step(
        read_decider, write=False, name=operator, seal=platform.seal()
    )
    call = replace(
        call_of(asked),
        irreversible=True,
        approvals_required=policy.approvals,
        self_approval=policy.self_approval,
        asked_by_operator=operator,
    )
    now = utcnow()
    job = Job(**calls.job_values(call, JobState.pending_approval, now))
    return judge(Standing(job=job), decider, intent=Intent.approve, now=now)


def _queued(platform: Platform, actor: Actor, step_up: StepUp | None, at_once: bool) -> Recording:
    """How a queued call starts: approved at once by the run form's operator who gave
    `step_up`, or waiting, with their approval (when they gave one) counted as the first."""
    # Its policy is signed as it is recorded: a database writer who lowers it (two approvals
    # to one, self-approval back on) makes a job nobody can approve.
    waiting = calls.Waiting(ttl_s=platform.settings.approval_ttl_s, seal=platform.seal())
    if step_up is None or not actor.operator:
        return Recording(start=waiting)
    signer = signing.signer_for(platform.settings.home)
    if at_once:
        # The dashboard operator's run is their approval: signed like one from the queue.
        approved = calls.Approved(
            decided_by=actor.operator, signer=signer, step_up=step_up.describe()
        )
        return Recording(start=approved)
    context = jobs.Context(address=actor.address, step_up=step_up.describe())
    return Recording(start=waiting, after=(first_approval(signer, actor.operator, context),))


def pending_preview(preview: ActionSpec) -> After:
    """Writes the job's `pending` preview row, in the transaction that queues the job."""
    return lambda session, job: previews.add_pending(session, job.id or 0, preview)


def first_approval(signer: DecisionSigner, operator: str, context: jobs.Context) -> After:
    """`operator`'s approval, given in the transaction that records the job (the run form's
    operator, or the operator who edited a call into this one)."""

    def approve(session: Session, job: Job) -> None:
        jobs.approve(
            session=session,
            job_id=job.id or 0,
            operator=operator,
            digest=job.args_digest,
            signer=signer,
            context=context,
        )

    return approve


def call_of(asked: Asked) -> calls.Call:
    """The call `asked` is, as a job records it."""
    spec, actor = asked.spec, asked.actor
    action = asked.action.name
    return calls.Call(
        kind=spec.kind,
        name=spec.name,
        action=action,
        args=asked.args,
        digest=args_digest(kind=spec.kind, name=spec.name, action=action, args=asked.args),
        irreversible=asked.irreversible,
        surface=actor.surface,
        client=actor.client,
        requested_by=actor.operator or actor.agent or actor.client,
        requester_proof=actor.proof,
        address=actor.address,
    )


def record_job(
    *, platform: Platform, asked: Asked, how: Recording, policy: Policy | None = None
) -> int:
    """Record `asked` as a job (`create`, in its own transaction) and return its id (or
    raise `how.refuse`'s `Refusal`). `policy` (irreversible calls) is the approval policy the job
    keeps; the operator who asked is recorded with it (the run form's, or the owner of the
    agent token that asked)."""
    call = call_of(asked)
    actor = asked.actor

    def insert(session: Session) -> int:
        recorded = call
        if policy is not None:
            asker = actor.operator or (
                agent_owner(session=session, name=actor.agent) if actor.agent else None
            )
            recorded = replace(
                call,
                asked_by_operator=asker,
                approvals_required=policy.approvals_required,
                self_approval=policy.self_approval,
                agent_reason=policy.agent_reason,
            )
        return create(session, recorded, how).id or 0

    return platform.jobs.step(insert)
