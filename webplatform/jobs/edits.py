"""Edit, then approve (SPEC §11): an operator changes a pending call's arguments and approves
the changed call in one step. Only the dashboard imports this module.

In one transaction the original is denied (`edited by <operator>`) and a new job with the
edited arguments is created, linked by `edited_from`, with the editor's approval counted as
the first of the approvals it needs. The agent waiting on the original follows the new job
(`tracking.current_job`). An import-linter contract keeps the MCP bridge and the command
line away from this module, as from `webplatform.jobs.decisions`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from webplatform.canonical import args_digest
from webplatform.jobs import calls, previews
from webplatform.jobs import states as jobs
from webplatform.jobs.admission import args_too_big
from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.resolution import resolve_call
from webplatform.platform import Platform
from webplatform.registry.model import ActionSpec, RunnableKind, ToolSpec
from webplatform.registry.validation import secret_args_problem, validate_args
from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.audit_chain import lock_chain
from webplatform.store.models import Job, JobState, utcnow
from webplatform.store.transitions import fetch_job, stale_error
from webplatform.trust import signing
from webplatform.trust.authority import seal_for
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


def editable(*, platform: Platform, job_id: int) -> tuple[Job, ActionSpec] | Answer:
    """The pending job and its action's schema, for the edit form; or an `invalid` answer
    saying why this job cannot be edited (no such job, not pending, action gone)."""
    job = platform.transact(lambda s: jobs.get_job(session=s, job_id=job_id), write=False)
    if job is None:
        return Answer(Status.invalid, error=f"no job {job_id}: it never existed or was pruned")
    if job.state != JobState.pending_approval:
        who = f" by {job.decided_by}" if job.decided_by else ""
        return Answer(
            Status.invalid,
            job=job_id,
            error=f"job {job_id} is {job.state.value}{who}, no longer pending: only a pending "
            "call can be edited; reload the approvals page",
        )
    kind: RunnableKind = "agent" if job.kind == "agent" else "tool"
    resolved = resolve_call(platform.registry(), kind, job.name, job.action)
    if isinstance(resolved, Answer):
        return resolved
    return job, resolved[1]


def prepare(*, platform: Platform, job_id: int, args: Any) -> Edit | Answer:
    """Validate `args` as a call of pending job `job_id`'s action, exactly like any call (size,
    schema, no secrets in the queue); the `Edit` to approve, or an `invalid` answer whose
    `error` is the one line to show in the form."""
    found = editable(platform=platform, job_id=job_id)
    if isinstance(found, Answer):
        return found
    job, act = found
    if (too_big := args_too_big(settings=platform.settings, args=args)) is not None:
        return Answer(Status.invalid, job=job_id, error=too_big)
    clean, problems = validate_args(act, args)
    if problems:
        return Answer(Status.invalid, job=job_id, error=problems.line)
    if (secret := secret_args_problem(act, clean)) is not None:
        return Answer(Status.invalid, job=job_id, error=secret)
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
    `StepUpMismatch`). Raises what an Approve of the original would: `jobs.StaleState`
    (someone decided first: nothing is created), `jobs.ApprovalExpired`, `jobs.NotAllowed`
    (a viewer; the asker when self-approval is off), `jobs.JobNotFound`. Returns the new
    job: `approved` when one approval is enough, else still pending the others.
    """
    check_step_up(step_up, operator=operator, digest=edit.digest)
    signer = signing.signer_for(platform.settings.home)
    seal = seal_for(platform)
    proof = step_up.describe()
    preview = _preview_of(platform, edit)

    def apply(session: Session) -> Job:
        # Queued behind Approve and Deny of the same job: of an edit and an approval of the
        # original racing, one compare-and-set wins and the other changes nothing.
        lock_chain(session)
        original = fetch_job(session, edit.job_id)
        if original.state != JobState.pending_approval:
            raise stale_error(original, JobState.pending_approval)
        if original.expires_at is not None and original.expires_at <= utcnow():
            raise jobs.ApprovalExpired(edit.job_id)
        jobs.check_may_decide(session, original, operator, approving=True, seal=seal)
        jobs.deny(
            session=session,
            job_id=edit.job_id,
            operator=operator,
            reason=f"edited by {operator}",
            address=address,
            signer=signer,
        )
        call = calls.Call(
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
        edited = calls.create_job(
            session=session,
            call=call,
            start=calls.Waiting(ttl_s=platform.settings.approval_ttl_s),
        )
        assert edited.id is not None  # flushed by create_job
        _record_edit(session, original, edited, operator, address)
        approved = jobs.approve(
            session=session,
            job_id=edited.id,
            operator=operator,
            digest=edit.digest,
            signer=signer,
            address=address,
            step_up=proof,
            seal=seal,
        )
        if preview is not None and approved.state is JobState.pending_approval:
            previews.add_pending(session, edited.id, preview[1])
        return approved

    job = platform.transact(apply)
    if preview is not None and job.state is JobState.pending_approval and job.id is not None:
        # The edited call still waits for others: they see what it would do (SPEC §16).
        previews.start(platform, *preview, edit.args, job.id)
    return job


def _preview_of(platform: Platform, edit: Edit) -> tuple[ToolSpec, ActionSpec] | None:
    """The edited call's tool and preview action, when its action has one."""
    resolved = resolve_call(platform.registry(), edit.kind, edit.name, edit.action)
    if isinstance(resolved, Answer):
        return None
    spec, action = resolved
    preview = previews.preview_action(spec, action)
    return None if preview is None else (spec, preview)


def _record_edit(
    session: Session, original: Job, edited: Job, operator: str, address: str | None
) -> None:
    """Both jobs' audit trails say who edited what into what."""
    before = json.loads(original.args_json)
    after = json.loads(edited.args_json)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    what = f"arguments changed: {', '.join(changed)}" if changed else "arguments unchanged"
    record_event(
        session,
        AuditEntry(
            actor=operator,
            event="edited",
            job_id=original.id,
            detail=f"edited into job {edited.id}; {what}",
            address=address,
        ),
    )
    record_event(
        session,
        AuditEntry(
            actor=operator,
            event="edited",
            job_id=edited.id,
            detail=f"edited from job {original.id}; {what}",
            address=address,
        ),
    )
