"""The only door to a run: registry -> validation -> gate -> job -> runner or approval queue.

Every surface (MCP bridge, dashboard, command line) calls `request_run`; nothing else starts
a run except the worker, which only executes jobs an operator approved.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from webplatform.canonical import args_digest
from webplatform.jobs import calls, execution
from webplatform.jobs.admission import args_too_big
from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.recording import queue_call, record_job
from webplatform.jobs.resolution import action_schema, resolve_call
from webplatform.jobs.tracking import answer_for, job_answer
from webplatform.platform import Actor, Platform
from webplatform.registry import resolve_secrets
from webplatform.registry.model import ActionSpec, RunnableKind, ToolSpec, run_tool_name
from webplatform.registry.validation import mask_secrets, secret_args_problem, validate_args
from webplatform.store.models import Surface
from webplatform.trust import gate
from webplatform.trust.policy import reason_problem
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
    if (too_big := args_too_big(settings=platform.settings, args=args)) is not None:
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
        confirmed = run_tool_name(kind, confirmed=True)
        return Answer(
            Status.approval_required,
            tool=name,
            action=act.name,
            use=confirmed,
            error=(
                f"{name} {act.name} is irreversible and needs an operator's approval: "
                f"call {confirmed} with the same arguments"
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
    if (secret := secret_args_problem(act, clean)) is not None:
        return Answer(Status.invalid, tool=name, action=act.name, error=secret)
    return queue_call(
        platform=platform,
        spec=spec,
        action=act,
        args=clean,
        actor=actor,
        step_up=operator_step_up,
        reason=reason or None,
    )


def _run_now(
    *, platform: Platform, spec: ToolSpec, action: ActionSpec, args: dict[str, Any], actor: Actor
) -> Answer:
    def record() -> int:
        job_id = record_job(
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
        return job_id

    row = execution.JobRow(record)  # written while the tool's process is prepared
    call = execution.JobCall(
        spec,
        action,
        args,
        resolve_secrets(spec.secrets),
        caller_cwd=actor.cwd,
        secret_args=[str(v) for k, v in args.items() if (a := action.arg(k)) and a.secret],
    )
    executor = execution.Executor(platform.engine, platform.settings, platform.process_id)
    finished = executor.execute(row, call)
    if finished is not None:  # as it was recorded, in the transaction that finished it
        return answer_for(finished, settings=platform.settings)
    return job_answer(platform=platform, job_id=row.write())
