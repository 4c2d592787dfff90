"""The only door to a run: registry -> validation -> gate -> job -> runner or approval queue.

Every surface (MCP bridge, dashboard, command line) calls `request_run`; nothing else starts
a run except the worker, which only executes jobs an operator approved.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from typing import Any

from sqlmodel import Session

from webplatform import calls, execution, gate, jobs, signing
from webplatform.answers import Answer, Status
from webplatform.canonical import args_digest, canonical_json
from webplatform.platform import Actor, Platform
from webplatform.policy import policy_for, reason_problem
from webplatform.registry import resolve_secrets
from webplatform.registry.model import ActionSpec, Registry, RunnableKind, ToolSpec
from webplatform.stepup import StepUp, check_step_up
from webplatform.store.agents import agent_owner
from webplatform.store.engine import transact
from webplatform.store.models import Job, Surface
from webplatform.store.queries import count_pending_from
from webplatform.suggest import did_you_mean
from webplatform.tracking import job_answer
from webplatform.validation import describe_arg, has_secret_args, mask_secrets, validate_args


class Consent(Enum):
    """How the requester consented to a run, which decides what an irreversible action does.

    - `NONE`: plain `run_tool`/`run_agent` (and the chat surface): only reversible actions
      run; an irreversible one is refused with `approval_required`.
    - `QUEUE`: `run_*_confirmed`, `aat run`, a re-run: an irreversible action waits in the
      approval queue for an operator.
    - `OPERATOR`: the dashboard's run form after its confirm step and step-up; the logged-in
      operator who confirmed is the approver, so the job starts approved (and signed).
    """

    NONE = "none"
    QUEUE = "queue"
    OPERATOR = "operator"


def resolve_call(
    registry: Registry, kind: RunnableKind, name: str, action: str | None
) -> tuple[ToolSpec, ActionSpec] | Answer:
    """The tool and action a call names, or an `invalid` answer saying how to fix the call."""
    spec = registry.runnable(kind, name)
    if spec is None:
        known = sorted(registry.runnables(kind))
        near = did_you_mean(name, known)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        return Answer(
            Status.invalid,
            tool=name,
            error=f"unknown {kind} {name!r}{hint}; call capabilities to list every {kind}",
            did_you_mean=near or None,
        )
    names = [a.name for a in spec.actions]
    if action is None or action == "":
        if len(spec.actions) == 1:
            return spec, spec.actions[0]
        return Answer(
            Status.invalid,
            tool=name,
            error=(
                f"{kind} {name!r} has {len(names)} actions; pass action: one of {', '.join(names)}"
            ),
            did_you_mean=names,
        )
    act = spec.action(action)
    if act is None:
        near = did_you_mean(action, names)
        hint = f" did you mean {', '.join(near)}?" if near else ""
        return Answer(
            Status.invalid,
            tool=name,
            action=action,
            error=f"{kind} {name!r} has no action {action!r};{hint} actions: {', '.join(names)}",
            did_you_mean=near or None,
        )
    return spec, act


def action_schema(action: ActionSpec) -> list[dict[str, Any]]:
    """The argument schema of an action, as agents are shown it."""
    return [describe_arg(a) for a in action.args]


def request_run(
    *,
    platform: Platform,
    kind: RunnableKind,
    name: str,
    action: str | None,
    args: Any,
    actor: Actor,
    consent: Consent,
    step_up: StepUp | None = None,
    reason: Any = None,
) -> Answer:
    """Validate and gate a call, then run it now (reversible) or queue it for approval.

    `consent` says what an irreversible action does (see `Consent`). `Consent.OPERATOR` is
    refused (PermissionError) unless `actor` is a logged-in operator on the dashboard who
    gave `step_up`, the fresh proof the dashboard verified, theirs and for exactly these
    arguments; no other consent reads `step_up`. It approves the run at once only when one
    approval is enough and self-approval is allowed; otherwise the job is queued with their
    approval counted as the first, or (no self-approval) not at all. `reason` is the agent's
    own word on why it wants the call (at most 500 characters), shown to the deciders.
    """
    resolved = resolve_call(platform.registry(), kind, name, action)
    if isinstance(resolved, Answer):
        return resolved
    spec, act = resolved
    if (bad_reason := reason_problem(reason)) is not None:
        return Answer(Status.invalid, tool=name, action=act.name, error=bad_reason)
    if (too_big := _args_too_big(platform, args)) is not None:
        return Answer(Status.invalid, tool=name, action=act.name, error=too_big)
    clean, problems = validate_args(act, args)
    if problems:
        return Answer(
            Status.invalid,
            tool=name,
            action=act.name,
            error=problems.line,
            schema=action_schema(act),
            did_you_mean=problems.did_you_mean or None,
        )
    if not gate.is_irreversible(spec.name, act):
        return _run_now(platform=platform, spec=spec, action=act, args=clean, actor=actor)
    if consent is Consent.NONE:
        return Answer(
            Status.approval_required,
            tool=name,
            action=act.name,
            use=f"run_{kind}_confirmed",
            error=(
                f"{name} {act.name} is irreversible and needs an operator's approval: "
                f"call run_{kind}_confirmed with the same arguments"
            ),
        )
    operator_step_up = None
    if consent is Consent.OPERATOR:
        if not (actor.surface is Surface.dashboard and actor.operator and step_up is not None):
            raise PermissionError(
                "only a logged-in operator on the dashboard, with a step-up, approves a run"
            )
        digest = args_digest(kind=spec.kind, name=spec.name, action=act.name, args=clean)
        check_step_up(step_up, operator=actor.operator, digest=digest)
        operator_step_up = step_up
    mcp = actor.surface in (Surface.mcp_stdio, Surface.mcp_http)
    if mcp and platform.settings.mcp_deny_irreversible:
        return Answer(
            Status.refused,
            tool=name,
            action=act.name,
            error="irreversible actions are switched off here (AAT_MCP_DENY_IRREVERSIBLE=1)",
        )
    if has_secret_args(act, clean):
        secret = [a.name for a in act.args if a.secret and a.name in clean]
        return Answer(
            Status.invalid,
            tool=name,
            action=act.name,
            error=(
                f"secret argument(s) {', '.join(secret)} cannot wait in the approval queue; "
                "declare them under the tool's `secrets` and set them in the environment or keyring"
            ),
        )
    return _queue(
        platform=platform,
        spec=spec,
        action=act,
        args=clean,
        actor=actor,
        step_up=operator_step_up,
        reason=reason or None,
    )


def _args_too_big(platform: Platform, args: Any) -> str | None:
    """Why `args` are too large to accept (canonical JSON over AAT_MAX_ARGS_BYTES), or None."""
    limit = platform.settings.max_args_bytes
    try:
        size = len(canonical_json(args).encode("utf-8"))
    except (TypeError, ValueError):
        return None  # not JSON at all: validation says what is wrong
    if size <= limit:
        return None
    return (
        f"arguments are {size} bytes of JSON, over the {limit}-byte limit (AAT_MAX_ARGS_BYTES); "
        "pass large content as a file path or in smaller calls"
    )


def _over_pending_limit(platform: Platform, actor: Actor) -> Callable[[Session], str | None]:
    """A check, run in the transaction that queues the job: why this requester may not queue
    another call (`AAT_MAX_PENDING` already waiting), or None."""
    limit = platform.settings.max_pending
    # The agent token when the call carried one; else the client's own name, the only other
    # identity a client has (it is self-reported, so a client that renames itself gets a
    # new share: the approvals page still reaches every card).
    requester = actor.operator or actor.agent or actor.client

    def check(session: Session) -> str | None:
        waiting = count_pending_from(session=session, surface=actor.surface, requested_by=requester)
        if waiting < limit:
            return None
        who = f"{requester!r} via {actor.surface.value}" if requester else actor.surface.value
        return (
            f"{who} already has {waiting} calls waiting for approval, the limit "
            f"(AAT_MAX_PENDING={limit}); ask again once an operator has approved or denied "
            "some of them on the dashboard's approvals page, or they have expired"
        )

    return check


def _queue(
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
    otherwise waits, their approval counted as the first if they may give one."""
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
    job_id = _create_job(
        platform=platform,
        spec=spec,
        action=action,
        stored_args=args,
        actor=actor,
        irreversible=True,
        start=start,
        refuse=None if step_up is not None else _over_pending_limit(platform, actor),
        policy={
            "approvals_required": policy.approvals,
            "self_approval": policy.self_approval,
            "agent_reason": reason,
        },
        after=after,
    )
    if isinstance(job_id, str):
        return Answer(Status.refused, tool=spec.name, action=action.name, error=job_id)
    return job_answer(platform=platform, job_id=job_id)


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


def _run_now(
    *, platform: Platform, spec: ToolSpec, action: ActionSpec, args: dict[str, Any], actor: Actor
) -> Answer:
    job_id = _create_job(
        platform=platform,
        spec=spec,
        action=action,
        stored_args=mask_secrets(action, args),
        actor=actor,
        irreversible=False,
        start=calls.Running(
            worker_id=platform.process_id, lease_s=platform.settings.worker_lease_s
        ),
    )
    assert isinstance(job_id, int)  # nothing refuses a reversible run here
    execution.execute(
        engine=platform.engine,
        settings=platform.settings,
        worker_id=platform.process_id,
        job_id=job_id,
        tool=spec,
        action=action,
        args=args,
        secrets=resolve_secrets(spec.secrets),
        caller_cwd=actor.cwd,
        secret_args=[str(v) for k, v in args.items() if (a := action.arg(k)) and a.secret],
    )
    return job_answer(platform=platform, job_id=job_id)


def _create_job(
    *,
    platform: Platform,
    spec: ToolSpec,
    action: ActionSpec,
    stored_args: dict[str, Any],
    actor: Actor,
    irreversible: bool,
    start: calls.Start,
    refuse: Callable[[Session], str | None] | None = None,
    policy: dict[str, Any] | None = None,
    after: Callable[[Session, Job], None] | None = None,
) -> int | str:
    """Insert the job row (arguments as stored: secrets masked) and return its id.

    `refuse`, run in the same transaction first, may return why not to insert: that is
    returned instead of an id. `policy` (irreversible calls) is the approval policy the job
    keeps; the operator who asked is recorded with it (the run form's, or the owner of the
    agent token that asked). `after` runs in the same transaction once the row exists.
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
        address=actor.address,
    )

    def insert(session: Session) -> int | str:
        if refuse is not None and (reason := refuse(session)) is not None:
            return reason
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

    return transact(platform.engine, insert)
