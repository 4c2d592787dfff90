"""The only door to a run: registry -> validation -> gate -> job -> runner or approval queue.

Every surface (MCP bridge, dashboard, command line) calls `request_run`; nothing else starts
a run except the worker, which only executes jobs an operator approved.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from webplatform.canonical import args_digest
from webplatform.jobs import calls, execution, ruling
from webplatform.jobs.admission import args_too_big
from webplatform.jobs.answers import Answer, Refusal, Status
from webplatform.jobs.recording import Asked, Recording, queue_call, record_job
from webplatform.jobs.resolution import action_schema, resolve_call
from webplatform.jobs.tracking import answer_for, job_answer
from webplatform.platform import Actor, Platform
from webplatform.registry import resolve_secrets
from webplatform.registry.model import ActionSpec, RunnableKind, run_tool_name
from webplatform.registry.validation import mask_secrets, secret_args_problem, validate_args
from webplatform.store.models import Surface
from webplatform.trust import gate
from webplatform.trust.policy import people_needed, policy_for, reason_problem
from webplatform.trust.rules import Match
from webplatform.trust.stepup import StepUp, check_step_up


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


@dataclass(frozen=True)
class RunCall:
    """A call as a surface received it, not yet validated: which tool or agent, which action
    (None: its only one), the arguments, and the agent's own word on why it wants it."""

    kind: RunnableKind
    name: str
    action: str | None
    args: Any
    reason: Any = None


def request_run(
    *,
    platform: Platform,
    call: RunCall,
    actor: Actor,
    consent: Consent,
    step_up: StepUp | None = None,
) -> Answer:
    """Validate and gate `call`, then run it now (reversible) or queue it for approval: the
    answer of the run or of the queued job. A call that cannot go on raises `Refusal` with
    its `invalid`, `approval_required` or `refused` answer.

    `consent` says what an irreversible action does (see `Consent`). `Consent.OPERATOR` is
    refused (PermissionError) unless `actor` is a logged-in operator on the dashboard who
    gave `step_up`, the fresh proof the dashboard verified, theirs and for exactly these
    arguments; no other consent reads `step_up`. It approves the run at once only when one
    approval is enough and self-approval is allowed; otherwise the job is queued with their
    approval counted as the first, or (no self-approval) not at all. `call.reason` is the
    agent's own word on why it wants the call (at most 500 characters), shown to deciders.
    """
    reason = call.reason
    spec, act = resolve_call(platform.registry(), call.kind, call.name, call.action)
    clean = _validated(platform, spec.name, act, call.args, reason)
    asked = Asked(spec=spec, action=act, args=clean, actor=actor)
    ruled = ruling.match(platform, asked) if consent is not Consent.OPERATOR else None
    if ruled is not None and ruled.effect == "deny":
        raise ruling.refuse(asked, ruled)
    asks = ruled is not None and ruled.effect == "ask"
    if not gate.is_irreversible(spec.name, act) and not asks:
        return _run_now(platform=platform, asked=asked)
    if asks and consent is Consent.NONE:
        consent = Consent.QUEUE  # an `ask` rule queues the call whichever tool asked for it
    _check_irreversible(platform, asked, consent, step_up)
    if ruled is not None and ruled.effect == "allow" and consent is Consent.QUEUE:
        allowed = _allowed(platform, asked, ruled, reason)
        if allowed is not None:
            return allowed
    return queue_call(
        platform=platform,
        asked=asked,
        step_up=step_up if consent is Consent.OPERATOR else None,
        reason=reason or None,
    )


def _validated(
    platform: Platform, name: str, act: ActionSpec, args: Any, reason: Any
) -> dict[str, Any]:
    """The call's arguments, validated against `act` (of tool `name`); or `Refusal` with the
    `invalid` answer saying what is wrong with them or with the agent's `reason`."""
    if (bad_reason := reason_problem(reason)) is not None:
        raise Refusal(Status.invalid, tool=name, action=act.name, error=bad_reason)
    if (too_big := args_too_big(settings=platform.settings, args=args)) is not None:
        raise Refusal(Status.invalid, tool=name, action=act.name, error=too_big)
    clean, problems = validate_args(act, args)
    if problems:
        raise Refusal(
            Status.invalid,
            tool=name,
            action=act.name,
            error=problems.line,
            schema=action_schema(act),
            did_you_mean=problems.did_you_mean or None,
        )
    return clean


def _check_irreversible(
    platform: Platform, asked: Asked, consent: Consent, step_up: StepUp | None
) -> None:
    """`Refusal` saying why an irreversible call may not be queued as asked. Raises
    PermissionError for `Consent.OPERATOR` from anyone but a dashboard operator who gave
    `step_up`, theirs and for exactly these arguments."""
    spec, act, actor = asked.spec, asked.action, asked.actor
    name, kind = spec.name, spec.kind
    if consent is Consent.NONE:
        confirmed = run_tool_name(kind, confirmed=True)
        raise Refusal(
            Status.approval_required,
            tool=name,
            action=act.name,
            use=confirmed,
            error=(
                f"{name} {act.name} is irreversible and needs an operator's approval: "
                f"call {confirmed} with the same arguments"
            ),
        )
    if consent is Consent.OPERATOR:
        if not (actor.surface is Surface.dashboard and actor.operator and step_up is not None):
            raise PermissionError(
                "only a logged-in operator on the dashboard, with a step-up, approves a run"
            )
        digest = args_digest(kind=spec.kind, name=spec.name, action=act.name, args=asked.args)
        check_step_up(step_up, operator=actor.operator, digest=digest)
    mcp = actor.surface in (Surface.mcp_stdio, Surface.mcp_http)
    if mcp and platform.settings.mcp_deny_irreversible:
        raise Refusal(
            Status.refused,
            tool=name,
            action=act.name,
            error="irreversible actions are switched off here (AAT_MCP_DENY_IRREVERSIBLE=1)",
        )
    if (secret := secret_args_problem(act, asked.args)) is not None:
        raise Refusal(Status.invalid, tool=name, action=act.name, error=secret)


def _allowed(platform: Platform, asked: Asked, ruled: Match, reason: Any) -> Answer | None:
    """The answer of a call an `allow` rule lets run without asking; None when the action
    always asks (several approvals, or not the asker's own: no rule stands in for people)."""
    if people_needed(policy_for(platform.settings, asked.action)) is not None:
        return None
    return ruling.allow(platform, asked, ruled, reason or None)


def _run_now(*, platform: Platform, asked: Asked) -> Answer:
    action, args = asked.action, asked.args
    recording = Recording(
        start=calls.Running(worker_id=platform.process_id, lease_s=platform.settings.worker_lease_s)
    )

    def record() -> int:
        stored = replace(asked, args=mask_secrets(action, args))
        return record_job(platform=platform, asked=stored, how=recording)

    row = execution.JobRow(record)  # written while the tool's process is prepared
    call = execution.JobCall(
        asked.spec,
        action,
        args,
        resolve_secrets(asked.spec.secrets),
        caller_cwd=asked.actor.cwd,
        secret_args=[str(v) for k, v in args.items() if (a := action.arg(k)) and a.secret],
    )
    executor = execution.Executor(platform, platform.settings, platform.process_id)
    finished = executor.execute(row, call)
    if finished is not None:  # as it was recorded, in the transaction that finished it
        return answer_for(finished, settings=platform.settings)
    return job_answer(platform=platform, job_id=row.write())
