"""Edit, then approve: a pending call's arguments changed by the operator who approves them.

The form is the action's own (one input per argument, named after it, prefilled with the
call's values) and is validated like any call; submitting it needs the same step-up as
Approve, bound to the edited arguments' digest: the operator's password, or a passkey
assertion over a challenge issued for that digest. The edited digest exists only once the
form's values are read, so static/passkeys.js first posts the form to `edit_step_up`, which
reads it exactly as the submission will be read and binds the challenge to the digest it
makes; the submission then recomputes the digest and the assertion must match it.
"""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, RedirectResponse, Response

from dashboard import data, passkeys, stepup, views
from dashboard.deps import (
    AddressDep,
    CheckerDep,
    DeciderDep,
    RelyingPartyDep,
    View,
    ViewDep,
    current_actor,
)
from dashboard.forms import EditProofForm
from dashboard.render import Notice, is_htmx
from dashboard.routes.approvals import render_queue
from dashboard.urls import url_for
from webplatform.jobs import edits
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Answer, Refusal, Status
from webplatform.platform import Platform
from webplatform.registry.model import ActionSpec
from webplatform.registry.validation import parse_text_args
from webplatform.store.models import Job, JobState
from webplatform.trust.stepup import StepUpMismatch

router = APIRouter()
# What refuses an edit once its step-up held (see `_not_approved`).
_NOT_APPROVED = (
    StepUpMismatch,
    jobs.JobNotFound,
    jobs.NotAllowed,
    jobs.ApprovalExpired,
    jobs.StaleState,
)


def render_edit(
    view: View,
    operator: str,
    job_id: int,
    *,
    raw: dict[str, str] | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    """The edit form of pending job `job_id`, refilled with `raw` after an error; or the
    reason it cannot be edited (no form then)."""
    request, platform = view.request, view.platform
    try:
        job, act = edits.editable(platform=platform, job_id=job_id)
    except Refusal as refusal:
        return _not_editable(view, job_id, refusal.answer)
    detail = data.job_detail(platform, job_id)
    assert detail is not None  # found just above
    current = views.text_values(json.loads(job.args_json))
    return view.pages.render(
        request,
        "job_edit.html",
        {
            "job": job,
            "action": act,
            "fields": views.form_fields(act, raw if raw is not None else current),
            "why_not": detail.approvals.blocked_for(operator, current_actor(request).role),
            **stepup.passkey_context(platform, operator),
            "error": error,
        },
        status_code=status_code,
    )


def _not_editable(view: View, job_id: int, answer: Answer) -> Response:
    """Why job `job_id` cannot be edited: 404 when there is no such job, else 409."""
    if answer.job is None:
        raise HTTPException(404, answer.error or f"no job {job_id}")
    return _refused(view, job_id, 409, answer.error or "")


def _refused(view: View, job_id: int, status_code: int, error: str) -> Response:
    """A refused edit: the approvals notice for htmx, else the job page with the error."""
    if is_htmx(view.request):
        return render_queue(view, Notice.refused(error, status_code), block="notice")
    detail = data.job_detail(view.platform, job_id)
    if detail is None:
        raise HTTPException(404, f"no job {job_id}: it never existed or was pruned")
    return view.pages.render(
        view.request,
        "job.html",
        {"d": detail, "job": detail.job, "has_passkey": False, "error": error},
        status_code=status_code,
    )


@router.get("/jobs/{job_id}/edit")
def edit_form(view: ViewDep, operator: DeciderDep, job_id: int) -> Response:
    """The pending call's arguments in its action's form, to change and approve."""
    return render_edit(view, operator, job_id)


@router.post("/jobs/{job_id}/edit")
async def edit_submit(
    view: ViewDep,
    checker: CheckerDep,
    operator: DeciderDep,
    address: AddressDep,
    job_id: int,
    form: Annotated[EditProofForm, Form()],
) -> Response:
    """Validate the edited arguments, check the step-up, then deny the original and create
    the edited job with this operator's approval, in one transaction."""
    read = await _read_edit(view, operator, job_id)
    if isinstance(read, Response):
        return read
    raw, edit = read

    def call() -> Job:
        step_up = stepup.verify(
            checker,
            operator=operator,
            proof=form.proof(),
            bound=stepup.Bound(purpose="approve", digest=edit.digest, job_id=job_id),
            address=address,
        )
        return edits.approve_edited(
            platform=view.platform, edit=edit, operator=operator, address=address, step_up=step_up
        )

    try:
        job = await run_in_threadpool(call)
    except stepup.StepUpRefused as exc:
        return render_edit(view, operator, job_id, raw=raw, error=str(exc), status_code=403)
    except _NOT_APPROVED as exc:
        return _not_approved(view, job_id, exc)
    # One approval of several: the edited job waits for the others.
    done = "edited-partial" if job.state is JobState.pending_approval else "edited"
    target = url_for(view.request, "job_page", job_id=job.id or 0) + f"?done={done}"
    return RedirectResponse(target, status_code=303)


@router.post("/jobs/{job_id}/edit/stepup")
async def edit_step_up(
    view: ViewDep, operator: DeciderDep, rp: RelyingPartyDep, job_id: int
) -> Response:
    """Passkey options (JSON) whose challenge can approve only the call this form's values
    make of job `job_id` (its digest computed here, as the submission will compute it)."""
    try:
        _job, act = edits.editable(platform=view.platform, job_id=job_id)
        raw = views.raw_form_values(act, await _form(view), prefix="")
        edit = _edit_of(view.platform, job_id, act, raw)
    except Refusal as refusal:
        error = refusal.answer.error or f"job {job_id} cannot be edited: reload the page"
        return JSONResponse({"error": error}, status_code=400)
    try:
        options = await run_in_threadpool(
            passkeys.assertion_options,
            platform=view.platform,
            rp=rp,
            operator=operator,
            purpose="approve",
            digest=edit.digest,
            job_id=job_id,
        )
    except passkeys.PasskeyError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return Response(options, media_type="application/json")


async def _form(view: View) -> dict[str, str]:
    """The submitted form's text fields."""
    return {k: v for k, v in (await view.request.form()).items() if isinstance(v, str)}


async def _read_edit(
    view: View, operator: str, job_id: int
) -> tuple[dict[str, str], edits.Edit] | Response:
    """The submitted form's values and the edit they make; or the page that says why there
    is none (the job cannot be edited, or the values are not a valid call)."""
    try:
        _job, act = edits.editable(platform=view.platform, job_id=job_id)
    except Refusal as refusal:
        return _not_editable(view, job_id, refusal.answer)
    raw = views.raw_form_values(act, await _form(view), prefix="")
    try:
        return raw, _edit_of(view.platform, job_id, act, raw)
    except Refusal as refusal:
        error = refusal.answer.error
        return render_edit(view, operator, job_id, raw=raw, error=error, status_code=400)


def _edit_of(platform: Platform, job_id: int, act: ActionSpec, raw: dict[str, str]) -> edits.Edit:
    """The edit the form's values make of job `job_id`; `Refusal` with the one line to show
    in the form when they make none."""
    args, problems = parse_text_args(act, raw)
    if problems:
        raise Refusal(Status.invalid, job=job_id, error=problems.line)
    return edits.prepare(platform=platform, job_id=job_id, args=args)


def _not_approved(view: View, job_id: int, exc: Exception) -> Response:
    """The refusal of an edit after its step-up: the job is gone, expired, no longer
    pending, or may not be decided by this operator."""
    if isinstance(exc, jobs.JobNotFound):
        raise HTTPException(404, f"no job {job_id}: it never existed or was pruned") from None
    if isinstance(exc, jobs.ApprovalExpired):
        error = f"job {job_id} expired before it was approved: it will not run; ask again"
        return _refused(view, job_id, 409, error)
    if isinstance(exc, jobs.StaleState):
        return _refused(view, job_id, 409, str(exc))
    return _refused(view, job_id, 403, str(exc))
