"""Operator decisions on queued jobs. Only the dashboard imports this module.

An import-linter contract keeps the MCP bridge and the command line away from it, so no
agent-facing tool and no CLI command can approve anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Answer, Refusal, Status
from webplatform.jobs.resolution import resolve_call
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Actor, Platform
from webplatform.registry.model import RunnableKind as RunnableKindLiteral
from webplatform.store.models import Job
from webplatform.trust import signing
from webplatform.trust.authority import report_forged
from webplatform.trust.stepup import StepUp, StepUpMismatch, check_step_up, each_in_batch


@dataclass(frozen=True)
class Shown:
    """What the operator's page showed of a call: its arguments' digest, and the digest of
    its preview ("" when it showed none; None when the caller shows none, which binds the
    preview as stored: SPEC §20)."""

    digest: str
    preview: str | None = None


def approve(
    *,
    platform: Platform,
    job_id: int,
    operator: str,
    digest: str,
    address: str | None,
    step_up: StepUp,
) -> Job:
    """Approve a pending job for exactly the arguments whose digest the operator saw (its
    preview as stored: `approve_shown` binds the one a page showed)."""
    return approve_shown(
        platform=platform,
        job_id=job_id,
        operator=operator,
        shown=Shown(digest),
        address=address,
        step_up=step_up,
    )


def approve_shown(
    *,
    platform: Platform,
    job_id: int,
    operator: str,
    shown: Shown,
    address: str | None,
    step_up: StepUp,
) -> Job:
    """Approve a pending job for exactly the call and preview the operator's page showed.

    `step_up` is the fresh proof the dashboard verified (password or passkey); it must be
    this operator's and for `shown.digest`, or `StepUpMismatch` is raised and nothing
    changes. The approval is signed with the dashboard's decision key (made on first use),
    over the preview's digest too. Raises `jobs.StaleState` (someone else decided),
    `jobs.ApprovalExpired`, `jobs.DigestMismatch` (`jobs.PreviewChanged`: the preview is not
    the one shown) or `jobs.JobNotFound`; the caller shows them as messages.
    """
    digest = shown.digest
    check_step_up(step_up, operator=operator, digest=digest)
    context = jobs.Context(address=address, step_up=step_up.describe(), preview=shown.preview)
    return _signed_decision(
        platform, jobs.approve, context, job_id=job_id, operator=operator, digest=digest
    )


def deny(
    *, platform: Platform, job_id: int, operator: str, reason: str | None, address: str | None
) -> Job:
    """Deny a pending job, signed like an approval; the reason reaches the agent that asked."""
    reason = (reason or "").strip()[:500] or None
    context = jobs.Context(address=address)
    return _signed_decision(
        platform, jobs.deny, context, job_id=job_id, operator=operator, reason=reason
    )


@dataclass(frozen=True)
class Outcome:
    """What became of one job of several decided at once: the job as decided, or the
    refusal that left it as it was."""

    job_id: int
    job: Job | None = None
    refused: Exception | None = None


def approve_batch(
    *,
    platform: Platform,
    operator: str,
    chosen: Sequence[tuple[int, str]],
    address: str | None,
    step_up: StepUp,
    previews: Mapping[int, str] | None = None,
) -> list[Outcome]:
    """Approve each (job id, digest) of `chosen` with one step-up, which must be this
    operator's proof for exactly that set (`StepUpMismatch`, nothing approved, otherwise),
    each bound to the digest of the preview its card showed (`previews`, by job id).

    Each job goes through `approve` on its own, in its own transaction, signed on its own
    digest, as if approved alone: a job that changed, expired, was decided meanwhile or may
    not be approved by this operator is refused alone (its `Outcome.refused`).
    """
    each = each_in_batch(step_up, operator=operator, chosen=chosen)
    shown = previews or {}

    def one(job_id: int, digest: str) -> Job:
        return approve_shown(
            platform=platform,
            job_id=job_id,
            operator=operator,
            shown=Shown(digest, shown.get(job_id)),
            address=address,
            step_up=each[job_id],
        )

    return [_outcome(job_id, partial(one, job_id, digest)) for job_id, digest in chosen]


def deny_batch(
    *,
    platform: Platform,
    operator: str,
    job_ids: Sequence[int],
    reason: str | None,
    address: str | None,
) -> list[Outcome]:
    """Deny each job of `job_ids` with the same reason, each through `deny` on its own (a
    denial needs no step-up, alone or not); a job that no longer waits is refused alone."""

    def one(job_id: int) -> Job:
        return deny(
            platform=platform, job_id=job_id, operator=operator, reason=reason, address=address
        )

    return [_outcome(job_id, partial(one, job_id)) for job_id in job_ids]


def _outcome(job_id: int, decide: Callable[[], Job]) -> Outcome:
    try:
        return Outcome(job_id=job_id, job=decide())
    except (jobs.JobError, StepUpMismatch) as exc:
        return Outcome(job_id=job_id, refused=exc)


def _signed_decision(
    platform: Platform, decide: Callable[..., Job], context: jobs.Context, **call: Any
) -> Job:
    """Run `decide(**call)` in one transaction, signed with the decision key and checking
    operator rows with the row seal, then write any forged authority rows it met to the
    audit trail (whether or not it succeeded)."""
    signer = signing.signer_for(platform.settings.home)
    context = replace(context, seal=platform.seal())
    try:
        return platform.jobs.step(decide, signer=signer, context=context, **call)
    finally:
        report_forged(platform)


def rerun(*, platform: Platform, job_id: int, actor: Actor) -> Answer:
    """Ask again for a finished job's exact call: a new job, with a new approval if
    irreversible (`Refusal` when it cannot be asked again)."""
    job = platform.jobs.get(job_id)
    if job is None:
        raise Refusal(Status.invalid, error=f"no job {job_id}")
    kind: RunnableKindLiteral = "agent" if job.kind == "agent" else "tool"
    name, action, args = job.name, job.action, json.loads(job.args_json)
    _spec, act = resolve_call(platform.registry(), kind, name, action)
    masked = [a.name for a in act.args if a.secret and a.name in args]
    if masked:
        # Stored secret arguments are masks, not values: re-running would send the mask.
        raise Refusal(
            Status.invalid,
            job=job_id,
            error=f"job {job_id} had secret argument(s) {', '.join(masked)}, which are "
            "never stored; run it again from the run form with the values",
        )
    return request_run(
        platform=platform,
        call=RunCall(kind=kind, name=name, action=action, args=args),
        actor=actor,
        consent=Consent.QUEUE,
    )


__all__ = [
    "Outcome",
    "Shown",
    "approve",
    "approve_shown",
    "approve_batch",
    "deny",
    "deny_batch",
    "rerun",
    "job_answer",
]
