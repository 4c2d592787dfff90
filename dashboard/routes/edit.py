"""Edit, then approve: a pending call's arguments changed by the operator who approves them.

The form is the action's own (one input per argument, named after it, prefilled with the
call's values) and is validated like any call; submitting it needs the same step-up as
Approve, bound to the edited arguments' digest. Only a typed password is taken here: a
passkey assertion is bound to a digest the server issued its challenge for, and the edited
digest exists only once the form is submitted.
"""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from dashboard import data, stepup, views
from dashboard.deps import AddressDep, CheckerDep, DeciderDep, View, ViewDep
from dashboard.render import is_htmx
from dashboard.routes.approvals import render_queue
from dashboard.urls import url_for
from webplatform.jobs import edits
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Answer
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
    found = edits.editable(platform=platform, job_id=job_id)
    if isinstance(found, Answer):
        if found.job is None:
            raise HTTPException(404, found.error or f"no job {job_id}")
        return _refused(view, job_id, 409, found.error or "")
    job, act = found
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
            "why_not": detail.approvals.blocked_for(operator, getattr(request.state, "role", None)),
            "error": error,
        },
        status_code=status_code,
    )


def _refused(view: View, job_id: int, status_code: int, error: str) -> Response:
    """A refused edit: the approvals notice for htmx, else the job page with the error."""
    if is_htmx(view.request):
        return render_queue(view, error=error, block="notice", status_code=status_code)
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
    # Named `_password` in the form: an argument may be called `password`, none `_password`.
    password: Annotated[str, Form(alias="_password")] = "",
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
            proof=stepup.Proof(password=password),
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


async def _read_edit(
    view: View, operator: str, job_id: int
) -> tuple[dict[str, str], edits.Edit] | Response:
    """The submitted form's values and the edit they make; or the page that says why there
    is none (the job cannot be edited, or the values are not a valid call)."""
    found = edits.editable(platform=view.platform, job_id=job_id)
    if isinstance(found, Answer):
        if found.job is None:
            raise HTTPException(404, found.error or f"no job {job_id}")
        return _refused(view, job_id, 409, found.error or "")
    form = {k: v for k, v in (await view.request.form()).items() if isinstance(v, str)}
    raw = views.raw_form_values(found[1], form, prefix="")
    args, problems = parse_text_args(found[1], raw)
    edit = edits.prepare(platform=view.platform, job_id=job_id, args=args)
    if problems or isinstance(edit, Answer):
        error = problems.line if problems else getattr(edit, "error", None)
        return render_edit(view, operator, job_id, raw=raw, error=error, status_code=400)
    return raw, edit


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
