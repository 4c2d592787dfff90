"""The only door to a run: registry -> validation -> gate -> job -> runner or approval queue.

Every surface (MCP bridge, dashboard, command line) calls `request_run`; nothing else starts
a run except the worker, which only executes jobs an operator approved.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from webplatform import execution, gate, jobs
from webplatform.answers import Answer, Status
from webplatform.canonical import args_digest
from webplatform.config import Settings
from webplatform.registry import RegistryLoader, resolve_secrets
from webplatform.registry.model import ActionSpec, Registry, RunnableKind, ToolSpec
from webplatform.store.engine import make_engine, session_scope, transact
from webplatform.store.models import Job, JobState, Surface
from webplatform.suggest import did_you_mean
from webplatform.validation import describe_arg, has_secret_args, mask_secrets, validate_args

STDERR_TAIL_CHARS = 2000
# The MCP bridge and `aat run` re-read a waiting job this often; approvals land within it.
WAIT_POLL_S = 0.1
IN_PROGRESS_STATES = frozenset({JobState.pending_approval, JobState.approved, JobState.running})


@dataclass(frozen=True)
class Actor:
    """Who asks for a run: the surface, the MCP client's name, the operator, their address."""

    surface: Surface
    client: str | None = None
    operator: str | None = None
    address: str | None = None
    # The caller's working directory, so tools can resolve relative paths the caller gave.
    cwd: Path | None = None

    @property
    def name(self) -> str:
        """The name shown in history and audit events."""
        return self.operator or self.client or self.surface.value


class Platform:
    """One process's handle on settings, database and registry, built once and passed around."""

    def __init__(self, settings: Settings, *, engine: Engine | None = None) -> None:
        self.settings = settings
        self.engine = engine or make_engine(settings)
        self.loader = RegistryLoader(settings.registry_roots)
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def registry(self) -> Registry:
        """The registry as it is on disk now (cached on modification times)."""
        return self.loader.load()

    @contextmanager
    def session(self, *, write: bool = True) -> Iterator[Session]:
        """A database session that commits on success and rolls back on error.

        `write=False` for reads: on SQLite it does not queue behind the write lock.
        """
        with session_scope(self.engine, write=write) as session:
            yield session


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
    confirmed: bool,
    operator_approved: bool = False,
) -> Answer:
    """Validate and gate a call, then run it now (reversible) or queue it for approval.

    `confirmed` is the `*_confirmed` tool (or `aat run`): without it an irreversible action is
    refused with `approval_required`. `operator_approved` is only for the dashboard's run form
    after its confirm step, where the logged-in operator is the approver.
    """
    resolved = resolve_call(platform.registry(), kind, name, action)
    if isinstance(resolved, Answer):
        return resolved
    spec, act = resolved
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
    if not confirmed:
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
    if operator_approved and not (actor.surface is Surface.dashboard and actor.operator):
        raise PermissionError("only a logged-in operator on the dashboard approves a run")
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
        approved=operator_approved,
    )


def _queue(
    *,
    platform: Platform,
    spec: ToolSpec,
    action: ActionSpec,
    args: dict[str, Any],
    actor: Actor,
    approved: bool,
) -> Answer:
    job_id = _create_job(
        platform=platform,
        spec=spec,
        action=action,
        stored_args=args,
        actor=actor,
        irreversible=True,
        state=JobState.approved if approved else JobState.pending_approval,
        ttl_s=None if approved else platform.settings.approval_ttl_s,
        decided_by=actor.operator if approved else None,
    )
    return job_answer(platform=platform, job_id=job_id)


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
        state=JobState.running,
        worker_id=platform.process_id,
        lease_s=platform.settings.worker_lease_s,
    )
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
    state: JobState,
    **extra: Any,
) -> int:
    """Insert the job row (arguments as stored: secrets masked) and return its id."""
    digest = args_digest(kind=spec.kind, name=spec.name, action=action.name, args=stored_args)

    def insert(session: Session) -> int:
        job = jobs.create_job(
            session=session,
            kind=spec.kind,
            name=spec.name,
            action=action.name,
            args=stored_args,
            digest=digest,
            irreversible=irreversible,
            state=state,
            surface=actor.surface.value,
            client=actor.client,
            requested_by=actor.operator or actor.client,
            address=actor.address,
            **extra,
        )
        assert job.id is not None  # flushed by create_job
        return job.id

    return transact(platform.engine, insert)


def approval_url(settings: Settings, job_id: int) -> str:
    """Where an operator decides on a job: the dashboard's job page."""
    return f"{settings.dashboard_url.rstrip('/')}/jobs/{job_id}"


def answer_for(job: Job, *, settings: Settings, warning: str | None = None) -> Answer:
    """The caller's view of a job in its current state."""
    state = JobState(job.state)
    base = Answer(Status(state.value), job=job.id, tool=job.name, action=job.action)
    if state is JobState.succeeded:
        base.result = json.loads(job.result_json) if job.result_json else None
    elif state in (JobState.failed, JobState.timed_out, JobState.lost, JobState.cancelled):
        base.error = job.error or f"job ended {state.value}"
        base.exit_code = job.exit_code
        if job.stderr:
            base.stderr_tail = job.stderr[-STDERR_TAIL_CHARS:]
    elif state is JobState.denied:
        base.reason = job.reason or "no reason given"
        base.decided_by = job.decided_by
    elif state is JobState.expired:
        base.error = "nobody approved this call in time; it did not run. Ask again if still needed."
    elif state is JobState.pending_approval:
        assert job.id is not None
        base.approval_url = approval_url(settings, job.id)
        base.expires_at = job.expires_at.isoformat() if job.expires_at else None
        base.next = (
            f"an operator must approve this call in the dashboard; call job_status with "
            f"job={job.id} (and wait_s) to get the outcome"
        )
        base.warning = warning
    elif state in (JobState.approved, JobState.running):
        base.decided_by = job.decided_by
        base.next = f"call job_status with job={job.id} to get the result"
    return base


NOBODY_TO_APPROVE = (
    "no dashboard is running: start it with `aat serve`, or nobody can approve this call"
)


def _dashboard_alive(session: Session, settings: Settings) -> bool:
    within = max(3 * settings.heartbeat_s, 10.0)
    return jobs.fresh_heartbeat(session=session, role="dashboard", within_s=within)


def job_answer(*, platform: Platform, job_id: int) -> Answer:
    """The current answer for a job id, or `invalid` when there is no such job."""
    with platform.session(write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        if job is None:
            return Answer(Status.invalid, error=f"no job {job_id}; job ids come from run results")
        warning = None
        if job.state == JobState.pending_approval.value and not _dashboard_alive(
            session, platform.settings
        ):
            warning = NOBODY_TO_APPROVE
        return answer_for(job, settings=platform.settings, warning=warning)


def job_state(*, platform: Platform, job_id: int) -> JobState | None:
    """Just the state of a job (cheap; used by waiting loops)."""
    with platform.session(write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        return None if job is None else JobState(job.state)


def wait_for_job(
    *,
    platform: Platform,
    job_id: int,
    timeout_s: float,
    on_wait: Callable[[float], None] | None = None,
    poll_s: float = WAIT_POLL_S,
) -> Answer:
    """Wait up to `timeout_s` for a job to finish or be decided; return its answer then.

    `on_wait(elapsed_s)` is called on every poll (progress notifications, lease renewals).
    Stopping the wait never stops the job.
    """
    start = time.monotonic()
    while True:
        state = job_state(platform=platform, job_id=job_id)
        if state is None or state not in IN_PROGRESS_STATES:
            break
        elapsed = time.monotonic() - start
        if elapsed >= timeout_s:
            break
        if on_wait is not None:
            on_wait(elapsed)
        time.sleep(min(poll_s, max(0.0, timeout_s - elapsed)))
    return job_answer(platform=platform, job_id=job_id)


def pending_for(
    *, platform: Platform, surface: Surface | None = None, client: str | None = None
) -> list[dict[str, Any]]:
    """Jobs waiting for an operator that came in through `surface` from `client`, oldest first.

    `None` matches any surface or client. Reading changes nothing (the MCP bridge's
    level-triggered approvals resource is built on this).
    """
    with platform.session(write=False) as session:
        waiting = jobs.pending_approvals(session=session, limit=500)
        return [
            {
                "job": job.id,
                "kind": job.kind,
                "tool": job.name,
                "action": job.action,
                "args": json.loads(job.args_json),
                "requested_at": job.created_at.isoformat(),
                "expires_at": job.expires_at.isoformat() if job.expires_at else None,
                "approval_url": approval_url(platform.settings, job.id or 0),
            }
            for job in waiting
            if (surface is None or Surface(job.surface) is surface)
            and (client is None or job.client == client)
        ]
