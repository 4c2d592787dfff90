"""Job history, one job's page, and the decisions taken on it (approve, deny, re-run).

Deciding goes only through `webplatform.jobs.decisions`, which compares-and-sets in the database:
of two operators clicking at once, one wins and the other is told who decided.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from dashboard import data, stepup
from dashboard.deps import (
    ActorDep,
    AddressDep,
    CheckerDep,
    DeciderDep,
    DenierDep,
    FiltersDep,
    OperatorDep,
    PagesDep,
    PlatformDep,
    View,
    ViewDep,
)
from dashboard.forms import ApproveForm, DenyForm
from dashboard.render import QUIET, Notice, is_htmx
from dashboard.routes.approvals import render_queue
from dashboard.urls import url_for
from webplatform.jobs import decisions
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import answered
from webplatform.store.models import Job, JobState, Surface
from webplatform.trust import door
from webplatform.trust.stepup import StepUpMismatch

router = APIRouter()
NOTICES = {
    "approved": "Approved",
    "denied": "Denied",
    "rerun": "Asked again as",
    "partial": "Your approval is recorded; it waits for more approvals:",
    "edited": "Approved the edited call as",
    "edited-partial": "Your edit and approval are recorded; it waits for more approvals:",
}


@router.get("/jobs")
def jobs_page(
    request: Request,
    platform: PlatformDep,
    pages: PagesDep,
    _operator: OperatorDep,
    filters: FiltersDep,
    before_id: int | None = None,
) -> Response:
    """Job history, newest first, filtered; "older" pages continue below the last id shown."""
    rows = data.job_page(platform=platform, filters=filters, before_id=before_id)
    older = rows[-1].id if len(rows) == data.PAGE_SIZE else None
    return pages.render(
        request,
        "jobs.html",
        {
            "rows": rows,
            "filters": filters,
            "older": older,
            "before_id": before_id,
            "states": list(JobState),
            "surfaces": list(Surface),
            "older_query": filters.query(before_id=older) if older else None,
            "export_query": filters.query(),
        },
        block="table",
    )


def render_job(
    view: View,
    job_id: int,
    notice: Notice = QUIET,
    *,
    block: str | None = None,
) -> Response:
    """The job page, optionally with a message about what just happened; only `block` of it
    when htmx asks for that fragment."""
    request, platform = view.request, view.platform
    operator = getattr(request.state, "operator", "")
    detail = data.job_detail(platform, job_id)
    if detail is None:
        raise HTTPException(404, f"no job {job_id}: it never existed or was pruned from history")
    return view.pages.render(
        request,
        "job.html",
        {
            "d": detail,
            "job": detail.job,
            **stepup.passkey_context(platform, operator),
            **notice.shown(),
        },
        block=block,
        status_code=notice.status,
    )


@router.get("/jobs/{job_id}")
def job_page(
    view: ViewDep,
    _operator: OperatorDep,
    job_id: int,
    done: str | None = None,
    new: int | None = None,
) -> Response:
    """Arguments, digest, timeline, result and output of one job; Approve/Deny while pending."""
    # htmx polls only the preview while it is pending (templates/_preview.html).
    return render_job(view, job_id, Notice(_notice(done, job_id, new)), block="preview")


def _notice(done: str | None, job_id: int, new: int | None) -> str | None:
    if done not in NOTICES:
        return None
    if done == "rerun":
        return f"Asked again as job {new}." if new else None
    return f"{NOTICES[done]} job {job_id}."


def _expired(job_id: int) -> str:
    return f"job {job_id} expired before it was approved: it will not run; ask for it again"


def _refusal(job_id: int, exc: jobs.JobError) -> tuple[int, str]:
    """The status and message of a refused decision: 409, the job is no longer as shown."""
    if isinstance(exc, jobs.PreviewChanged):
        return 409, (
            f"job {job_id}'s preview changed since this page showed it: review what it would "
            "do now, then decide again"
        )
    if isinstance(exc, jobs.DigestMismatch):
        return 409, (
            f"job {job_id}'s arguments are not the ones this page showed: reload the page "
            "and review them again"
        )
    if isinstance(exc, jobs.ApprovalExpired) or (
        # Expiry may have been recorded by a sweep just before the click: same message.
        isinstance(exc, jobs.StaleState) and exc.actual is JobState.expired
    ):
        return 409, _expired(job_id)
    return 409, str(exc)


def _refused(view: View, job_id: int, return_to: str, status_code: int, error: str) -> Response:
    """The refusal, with its true status for every client; htmx swaps the notice in anyway
    (`responseHandling` in base.html). The message names the job, as every outcome does
    (SPEC §25): an operator with several cards open sees which one it was about."""
    if f"job {job_id}" not in error:
        error = f"job {job_id}: {error}"
    refused = Notice.refused(error, status_code)
    if return_to == "approvals" or is_htmx(view.request):
        return render_queue(view, refused, block="notice")
    return render_job(view, job_id, refused)


async def _decide(
    view: View, job_id: int, verb: str, call: Callable[[], object], return_to: str
) -> Response:
    request = view.request
    try:
        job = await run_in_threadpool(call)
    except jobs.JobNotFound:
        raise HTTPException(404, f"no job {job_id}: it never existed or was pruned") from None
    except (stepup.StepUpRefused, StepUpMismatch, jobs.NotAllowed) as exc:
        return _refused(view, job_id, return_to, 403, str(exc))
    except (jobs.StaleState, jobs.ApprovalExpired, jobs.DigestMismatch) as exc:
        status_code, error = _refusal(job_id, exc)
        return _refused(view, job_id, return_to, status_code, error)
    except jobs.AlreadyApproved as exc:
        return _refused(view, job_id, return_to, 409, str(exc))
    if isinstance(job, Job) and job.state is JobState.pending_approval:
        # One approval of several: the job waits for the others.
        verb = "partial"
    if is_htmx(request):
        message = _notice(verb, job_id, None)
        return render_queue(view, Notice(message), block="notice")
    if return_to != "job":
        target = url_for(request, "approvals_page") + f"?done={verb}&job={job_id}"
    else:
        target = url_for(request, "job_page", job_id=job_id) + f"?done={verb}"
    return RedirectResponse(target, status_code=303)


@router.post("/jobs/{job_id}/approve")
async def approve(
    view: ViewDep,
    checker: CheckerDep,
    operator: DeciderDep,
    address: AddressDep,
    job_id: int,
    form: Annotated[ApproveForm, Form()],
) -> Response:
    """Approve exactly the call whose digest the page showed, with a fresh step-up (the
    operator's password typed in the card, or a passkey assertion bound to this digest)."""
    digest = form.digest
    if not digest.strip():
        error = "the form carried no digest of the arguments: reload the page and approve there"
        return _refused(view, job_id, form.return_to, 422, error)

    def call() -> Job:
        return door.decide(
            checker,
            operator=operator,
            proof=form.proof(),
            bound=stepup.Bound(purpose="approve", digest=digest, job_id=job_id),
            address=address,
            record=lambda step_up: decisions.approve_shown(
                platform=view.platform,
                job_id=job_id,
                operator=operator,
                shown=decisions.Shown(digest, form.preview),
                address=address,
                step_up=step_up,
            ),
        )

    return await _decide(view, job_id, "approved", call, form.return_to)


@router.post("/jobs/{job_id}/deny")
async def deny(
    view: ViewDep,
    operator: DenierDep,
    address: AddressDep,
    job_id: int,
    form: Annotated[DenyForm, Form()],
) -> Response:
    """Deny the call; the reason (optional) reaches the agent that asked."""

    def call() -> Job:
        return decisions.deny(
            platform=view.platform,
            job_id=job_id,
            operator=operator,
            reason=form.reason,
            address=address,
        )

    return await _decide(view, job_id, "denied", call, form.return_to)


@router.post("/jobs/{job_id}/rerun")
def rerun(view: ViewDep, actor: ActorDep, job_id: int) -> Response:
    """Ask again for the same call: a new job (a new approval if irreversible)."""
    answer = answered(decisions.rerun, platform=view.platform, job_id=job_id, actor=actor)
    if answer.job is None:
        return render_job(
            view,
            job_id,
            Notice.refused(answer.error or f"could not ask again: {answer.status.value}", 400),
        )
    target = url_for(view.request, "job_page", job_id=answer.job)
    target += f"?done=rerun&new={answer.job}"
    return RedirectResponse(target, status_code=303)
