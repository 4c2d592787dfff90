"""The run form: generated from an action's arguments, validated by the same code as MCP
calls. An irreversible action needs an explicit confirm step; confirming it is the
operator's approval, recorded as such.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, HTTPException, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from dashboard import stepup, views
from dashboard.deps import (
    ActorDep,
    AddressDep,
    LimiterDep,
    OperatorDep,
    PagesDep,
    PlatformDep,
    RelyingPartyDep,
    Runnable,
    RunnableDep,
)
from dashboard.urls import url_for
from webplatform.canonical import args_digest
from webplatform.jobs.answers import Status, answered
from webplatform.jobs.services import Consent, request_run
from webplatform.registry import ActionSpec
from webplatform.registry.validation import parse_text_args
from webplatform.trust import gate
from webplatform.trust.policy import policy_for

router = APIRouter()


def _action(runnable: Runnable, action: str) -> ActionSpec:
    act = runnable.spec.action(action)
    if act is None:
        names = ", ".join(a.name for a in runnable.spec.actions)
        raise HTTPException(
            404,
            f"{runnable.kind} {runnable.spec.name!r} has no action {action!r}; actions: {names}",
        )
    return act


@router.get("/run/{kind}/{name}/{action}")
def run_form(
    request: Request,
    pages: PagesDep,
    _operator: OperatorDep,
    runnable: RunnableDep,
    action: str,
) -> Response:
    """The form for one action, with defaults filled in."""
    act, spec = _action(runnable, action), runnable.spec
    return pages.render(
        request,
        "run.html",
        {
            "kind": runnable.kind,
            "tool": spec,
            "action": act,
            "fields": views.form_fields(act),
            "badge": gate.describe(spec.name, act),
            "error": None,
        },
    )


@router.post("/run/{kind}/{name}/{action}")
async def run_submit(
    request: Request,
    platform: PlatformDep,
    pages: PagesDep,
    actor: ActorDep,
    runnable: RunnableDep,
    limiter: LimiterDep,
    rp: RelyingPartyDep,
    address: AddressDep,
    action: str,
) -> Response:
    """Validate; confirm first if irreversible (with a step-up: confirming is approving);
    then run (or queue for the worker); show the job."""
    act, spec = _action(runnable, action), runnable.spec
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    raw = views.raw_form_values(act, form)
    args, problems = parse_text_args(act, raw)
    irreversible = gate.is_irreversible(spec.name, act)
    context = {
        "kind": runnable.kind,
        "tool": spec,
        "action": act,
        "badge": gate.describe(spec.name, act),
    }
    if problems:
        return pages.render(
            request,
            "run.html",
            {
                **context,
                "fields": views.form_fields(act, raw),
                "error": problems.line,
            },
            status_code=400,
        )
    digest = args_digest(kind=runnable.kind, name=spec.name, action=act.name, args=args)
    confirm = {
        **context,
        "raw": raw,
        "args_json": json.dumps(args, indent=2, ensure_ascii=False),
        "why": gate.why_irreversible(spec.name, act),
        "digest": digest,
        "error": None,
        "has_passkey": irreversible and stepup.has_passkey(platform, actor.operator or ""),
        "policy": policy_for(platform.settings, act),
    }
    if irreversible and form.get("confirm") != "yes":
        return pages.render(request, "run_confirm.html", confirm)
    step_up = None
    if irreversible:
        try:
            step_up = await run_in_threadpool(
                stepup.verify,
                platform=platform,
                limiter=limiter,
                rp=rp,
                operator=actor.operator or "",
                proof=stepup.Proof(
                    password=form.get("password", ""), passkey=form.get("passkey", "")
                ),
                bound=stepup.Bound(purpose="run", digest=digest),
                address=address,
            )
        except stepup.StepUpRefused as exc:
            return pages.render(
                request, "run_confirm.html", {**confirm, "error": str(exc)}, status_code=403
            )
    answer = await run_in_threadpool(
        answered,
        request_run,
        platform=platform,
        kind=runnable.kind,
        name=spec.name,
        action=act.name,
        args=args,
        actor=actor,
        consent=Consent.OPERATOR if irreversible else Consent.QUEUE,
        step_up=step_up,
    )
    if answer.job is None or answer.status is Status.invalid:
        return pages.render(
            request,
            "run.html",
            {
                **context,
                "fields": views.form_fields(act, raw),
                "error": answer.error or f"the run was {answer.status.value}",
            },
            status_code=400,
        )
    return RedirectResponse(url_for(request, "job_page", job_id=answer.job), status_code=303)
