"""Approve and allow similar (SPEC §16): approve one queued call and make an `allow` rule
for calls like it, in one step, with one step-up bound to both.

The proof is bound to the job, its digest and the rule's text together
(`trust.stepup.approve_allow_target`), so a proof given to approve the call alone, to make
a rule alone, or for another job or other choices, confirms nothing here (and one given
here confirms nothing elsewhere). The rule is checked and kept by the Rules page's own code;
it is made only once the call is approved, so a call that changed, expired or was decided
meanwhile leaves no rule behind.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from dashboard import similar, stepup
from dashboard.deps import AddressDep, CheckerDep, DeciderDep, View, ViewDep, permitted
from dashboard.render import Notice, is_htmx
from dashboard.routes.approvals import render_queue
from dashboard.routes.jobs import render_job
from dashboard.routes.rules import keep_rules
from webplatform.jobs import decisions
from webplatform.jobs import states as jobs
from webplatform.store.models import JobState
from webplatform.trust import rulebook
from webplatform.trust.permissions import Permission
from webplatform.trust.rules import Rule, RuleError
from webplatform.trust.stepup import Change, StepUpMismatch, approval_share

router = APIRouter()
NOT_ADMIN = (
    "only an admin may make rules, and Approve and allow similar makes one: use Approve, "
    "or ask an admin"
)
# What refuses the approval once the step-up held; no rule is made then.
_NOT_APPROVED = (
    jobs.StaleState,
    jobs.ApprovalExpired,
    jobs.DigestMismatch,
    jobs.NotAllowed,
    jobs.AlreadyApproved,
)


def _answer(
    view: View,
    job_id: int,
    return_to: str,
    notice: Notice,
) -> Response:
    """The outcome: the approvals page's notice for htmx, else the page the form was on."""
    if is_htmx(view.request):
        return render_queue(view, notice, block="notice")
    if return_to == "approvals":
        return render_queue(view, notice)
    return render_job(view, job_id, notice)


@router.post("/jobs/{job_id}/allow-similar")
async def allow_similar(
    view: ViewDep, checker: CheckerDep, operator: DeciderDep, address: AddressDep, job_id: int
) -> Response:
    """Approve job `job_id` and make the allow rule the form's choices describe, confirmed
    by one step-up bound to both; nothing at all when either cannot be done."""
    form = {k: v for k, v in (await view.request.form()).items() if isinstance(v, str)}
    return_to = form.get("return_to", "job")
    if not permitted(view.request, Permission.make_rules):
        return _answer(view, job_id, return_to, Notice.refused(NOT_ADMIN, 403))

    def call() -> str:
        return _approve_and_allow(view, checker, operator, address, job_id, form)

    try:
        message = await run_in_threadpool(call)
    except jobs.JobNotFound:
        raise HTTPException(404, f"no job {job_id}: it never existed or was pruned") from None
    except similar.NotSimilar as exc:
        return _answer(view, job_id, return_to, Notice.refused(str(exc), exc.status))
    except (stepup.StepUpRefused, StepUpMismatch) as exc:
        return _answer(view, job_id, return_to, Notice.refused(str(exc), 403))
    except _NOT_APPROVED as exc:
        return _answer(view, job_id, return_to, Notice.refused(_not_approved(job_id, exc), 409))
    return _answer(view, job_id, return_to, Notice(message))


def _approve_and_allow(
    view: View,
    checker: stepup.Checker,
    operator: str,
    address: str | None,
    job_id: int,
    form: dict[str, Any],
) -> str:
    """Check the rule, the step-up, then approve and keep the rule; what to tell the operator."""
    platform = view.platform
    made = similar.prepare(platform, job_id, form.get("digest", ""), form)
    try:
        rules = rulebook.parse(rulebook.Source(text=made.text), platform)
    except RuleError as exc:
        raise similar.NotSimilar(f"{exc}; nothing was approved", 422) from None
    step_up = stepup.verify(
        checker,
        operator=operator,
        proof=stepup.Proof(password=form.get("password", ""), passkey=form.get("passkey", "")),
        bound=stepup.for_change(operator, Change.approve_allow, made.target),
        address=address,
    )
    decisions.approve_shown(
        platform=platform,
        job_id=job_id,
        operator=operator,
        shown=decisions.Shown(made.target["digest"], form.get("preview")),
        address=address,
        step_up=approval_share(step_up, target=made.target),
    )
    (rule_id,) = keep_rules(platform, rules, by=operator)
    return _made(job_id, rule_id, rules[0])


def _made(job_id: int, rule_id: int, rule: Rule) -> str:
    """What the operator is told: the rule's number, what it allows, and until when."""
    until = rule.expires_at.strftime("%H:%M UTC") if rule.expires_at else "it is revoked"
    by = f" by {rule.requester}" if rule.requester else ""
    if rule.args:
        names = ", ".join(name for name, _cond in rule.args)
        what = f"calls like it ({names} as in this call){by} run"
    else:
        what = f"every call of {rule.tool} {rule.action}{by} runs"
    return f"Approved job {job_id} and made rule {rule_id}: {what} without asking until {until}."


def _not_approved(job_id: int, exc: Exception) -> str:
    """Why the approval was refused after the step-up held (no rule was made either)."""
    expired = isinstance(exc, jobs.ApprovalExpired) or (
        isinstance(exc, jobs.StaleState) and exc.actual is JobState.expired
    )
    if expired:
        return similar.EXPIRED.format(job=job_id)
    return f"{exc}; no rule was made"
