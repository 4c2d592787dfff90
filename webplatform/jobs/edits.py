"""Edit, then approve (SPEC §11): an operator changes a pending call's arguments and approves
the changed call in one step. Only the dashboard imports this module.

In one transaction the original is denied (`edited by <operator>`) and a new job with the
edited arguments is created, linked by `edited_from`, with the editor's approval counted as
the first of the approvals it needs. The agent waiting on the original follows the new job
(`store.queries.current_job`). An import-linter contract keeps the MCP bridge and the command
line away from this module, as from `webplatform.jobs.decisions`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from webplatform.canonical import args_digest
from webplatform.jobs import calls, previews, recording
from webplatform.jobs import states as jobs
from webplatform.jobs.admission import args_too_big
from webplatform.jobs.answers import Refusal, Status
from webplatform.jobs.resolution import resolve_call
from webplatform.platform import Platform
from webplatform.registry.model import ActionSpec, RunnableKind, ToolSpec
from webplatform.registry.validation import secret_args_problem, validate_args
from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.audit_chain import lock_chain
from webplatform.store.models import Job, JobState
from webplatform.store.transitions import fetch_job, stale_error
from webplatform.trust import claims, signing
from webplatform.trust.policy import policy_for
from webplatform.trust.stepup import StepUp, check_step_up


@dataclass(frozen=True)
class Edit:
    """A validated edit of pending job `job_id`: the arguments it would run with instead, and
    their digest (what the operator's step-up must be bound to)."""

    job_id: int
    kind: RunnableKind
    name: str
    action: str
    args: dict[str, Any]
    digest: str
    # The approval policy the edited job keeps: the action's, as for any new call.
    approvals_required: int = 1
    self_approval: bool = True


def editable(*, platform: Platform, job_id: int) -> tuple[Job, ActionSpec]:
    """The pending job and its action's schema, for the edit form; else `Refusal` with an
    `invalid` answer saying why this job cannot be edited (no such job, not pending, action
    gone)."""
    job = platform.jobs.get(job_id)
    if job is None:
        raise Refusal(Status.invalid, error=f"no job {job_id}: it never existed or was pruned")
    if job.state != JobState.pending_approval:
        stale = stale_error(
            job, JobState.pending_approval, unsigned=claims.unsigned(job, platform.seal())
        )
        raise Refusal(
            Status.invalid,
            job=job_id,
            error=f"{stale}, no longer pending: only a pending call can be edited; reload the "
            "approvals page",
        )
    kind: RunnableKind = "agent" if job.kind == "agent" else "tool"
    return job, resolve_call(platform.registry(), kind, job.name, job.action)[1]


def prepare(*, platform: Platform, job_id: int, args: Any) -> Edit:
    """Validate `args` as a call of pending job `job_id`'s action, exactly like any call (size,
    schema, no secrets in the queue); the `Edit` to approve, else `Refusal` with an `invalid`
    answer whose `error` is the one line to show in the form."""
    job, act = editable(platform=platform, job_id=job_id)
    if (too_big := args_too_big(settings=platform.settings, args=args)) is not None:
        raise Refusal(Status.invalid, job=job_id, error=too_big)
    clean, problems = validate_args(act, args)
    if problems:
        raise Refusal(Status.invalid, job=job_id, error=problems.line)
    if (secret := secret_args_problem(act, clean)) is not None:
        raise Refusal(Status.invalid, job=job_id, error=secret)
    kind: RunnableKind = "agent" if job.kind == "agent" else "tool"
    policy = policy_for(platform.settings, act)
    return Edit(
        job_id=job_id,
        kind=kind,
        name=job.name,
        action=act.name,
        args=clean,
        digest=args_digest(kind=kind, name=job.name, action=act.name, args=clean),
        approvals_required=policy.approvals,
        self_approval=policy.self_approval,
    )


def approve_edited(
    *, platform: Platform, edit: Edit, operator: str, address: str | None, step_up: StepUp
) -> Job:
    """Deny the original and create the edited job with `operator`'s approval, atomically.

    `step_up` must be this operator's, for the edited arguments' digest (else
    `StepUpMismatch`). Raises what an Approve of the original would (the decision point is
    the same): `jobs.StaleState` (someone decided first: nothing is created),
    `jobs.ApprovalExpired` (the expiry is recorded), `jobs.NotAllowed` (a viewer; the asker
    when self-approval is off), `jobs.JobNotFound`. Returns the new job: `approved` when one
    approval is enough, else still pending the others.
    """
    check_step_up(step_up, operator=operator, digest=edit.digest)
    signer = signing.signer_for(platform.settings.home)
    context = jobs.Context(address=address, step_up=step_up.describe(), seal=platform.seal())
    preview = _preview_of(platform, edit) if edit.approvals_required > 1 else None

    def apply(session: Session) -> Job:
        # Queued behind Approve and Deny of the same job: of an edit and an approval of the
        # original racing, one compare-and-set wins and the other changes nothing.
        lock_chain(session)
        original = fetch_job(session, edit.job_id)
        _, verdict = jobs.judge(
            session=session,
            job=original,
            operator=operator,
            intent=jobs.Intent.edit,
            context=context,
        )
        jobs.enforce(
            session=session, job=original, verdict=verdict, operator=operator, address=address
        )
        jobs.deny(
            session=session,
            job_id=edit.job_id,
            operator=operator,
            reason=f"edited by {operator}",
            signer=signer,
            context=jobs.Context(address=address),
        )
        after = [_record_edit(original, operator, address)]
        after.append(recording.first_approval(signer, operator, context))
        if preview is not None:
            after.append(recording.pending_preview(preview[1]))
        how = recording.Recording(
            start=calls.Waiting(ttl_s=platform.settings.approval_ttl_s, seal=context.seal),
            after=tuple(after),
        )
        edited = recording.create(session, _edited_call(edit, original, address), how)
        return fetch_job(session, edited.id or 0)

    job = platform.jobs.step(apply)
    if preview is not None and job.state is JobState.pending_approval and job.id is not None:
        # The edited call still waits for others: they see what it would do (SPEC §16).
        previews.start(platform, *preview, edit.args, job.id)
    return job


def _edited_call(edit: Edit, original: Job, address: str | None) -> calls.Call:
    """The edited call, asked for by whoever asked for the original, under the action's
    policy, linked to the original by `edited_from`."""
    return calls.Call(
        kind=edit.kind,
        name=edit.name,
        action=edit.action,
        args=edit.args,
        digest=edit.digest,
        irreversible=True,
        surface=original.surface,
        client=original.client,
        requested_by=original.requested_by,
        requester_proof=original.requester_proof,
        address=address,
        edited_from=edit.job_id,
        approvals_required=edit.approvals_required,
        self_approval=edit.self_approval,
        asked_by_operator=original.asked_by_operator,
        agent_reason=original.agent_reason,
    )


def _preview_of(platform: Platform, edit: Edit) -> tuple[ToolSpec, ActionSpec] | None:
    """The edited call's tool and preview action, when its action has one."""
    try:
        spec, action = resolve_call(platform.registry(), edit.kind, edit.name, edit.action)
    except Refusal:
        return None
    preview = previews.preview_action(spec, action)
    return None if preview is None else (spec, preview)


def _record_edit(original: Job, operator: str, address: str | None) -> recording.After:
    """Both jobs' audit trails say who edited what into what (run once the edited job exists)."""

    def record(session: Session, edited: Job) -> None:
        before = json.loads(original.args_json)
        after = json.loads(edited.args_json)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        what = f"arguments changed: {', '.join(changed)}" if changed else "arguments unchanged"
        for job_id, detail in (
            (original.id, f"edited into job {edited.id}; {what}"),
            (edited.id, f"edited from job {original.id}; {what}"),
        ):
            record_event(
                session,
                AuditEntry(
                    actor=operator, event="edited", job_id=job_id, detail=detail, address=address
                ),
            )

    return record
