"""The run form: generated from an action's arguments, validated by the same code as MCP
calls. An irreversible action needs an explicit confirm step; confirming it is the
operator's approval, recorded as such.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from dashboard import stepup, views
from dashboard.deps import (
    ActorDep,
    AddressDep,
    CheckerDep,
    OperatorDep,
    PagesDep,
    Runnable,
    RunnableDep,
    View,
    ViewDep,
)
from dashboard.urls import url_for
from webplatform.canonical import args_digest
from webplatform.jobs.answers import Status
from webplatform.jobs.services import Consent, request_run
from webplatform.platform import Actor, Platform
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
    view: ViewDep,
    checker: CheckerDep,
    actor: ActorDep,
    runnable: RunnableDep,
    address: AddressDep,
    action: str,
) -> Response:
    """Validate; confirm first if irreversible (with a step-up: confirming is approving);
    then run (or queue for the worker); show the job."""
    act, spec = _action(runnable, action), runnable.spec
    form = {k: v for k, v in (await view.request.form()).items() if isinstance(v, str)}
    raw = views.raw_form_values(act, form)
    args, problems = parse_text_args(act, raw)
    context = {
        "kind": runnable.kind,
        "tool": spec,
        "action": act,
        "badge": gate.describe(spec.name, act),
    }
    if problems:
        return _form_again(view, context, raw, problems.line)
    irreversible = gate.is_irreversible(spec.name, act)
    step_up = None
    if irreversible:
        confirm = _confirm_context(view.platform, actor, context, raw, args)
        if form.get("confirm") != "yes":
            return view.pages.render(view.request, "run_confirm.html", confirm)
        try:
            step_up = await run_in_threadpool(
                stepup.verify,
                checker,
                operator=actor.operator or "",
                proof=stepup.Proof(
                    password=form.get("password", ""), passkey=form.get("passkey", "")
                ),
                bound=stepup.Bound(purpose="run", digest=confirm["digest"]),
                address=address,
            )
        except stepup.StepUpRefused as exc:
            error = {**confirm, "error": str(exc)}
            return view.pages.render(view.request, "run_confirm.html", error, status_code=403)
    answer = await run_in_threadpool(
        request_run,
        platform=view.platform,
        kind=runnable.kind,
        name=spec.name,
        action=act.name,
        args=args,
        actor=actor,
        consent=Consent.OPERATOR if irreversible else Consent.QUEUE,
        step_up=step_up,
    )
    if answer.job is None or answer.status is Status.invalid:
        return _form_again(view, context, raw, answer.error or f"the run was {answer.status.value}")
    target = url_for(view.request, "job_page", job_id=answer.job)
    return RedirectResponse(target, status_code=303)


def _form_again(view: View, context: dict[str, Any], raw: dict[str, str], error: str) -> Response:
    """The run form again (400), refilled with what was typed, saying what was wrong."""
    fields = views.form_fields(context["action"], raw)
    page = {**context, "fields": fields, "error": error}
    return view.pages.render(view.request, "run.html", page, status_code=400)


def _confirm_context(
    platform: Platform,
    actor: Actor,
    context: dict[str, Any],
    raw: dict[str, str],
    args: dict[str, Any],
) -> dict[str, Any]:
    """What the confirm page of an irreversible call shows: the exact arguments, their
    digest (which the step-up is bound to), why it needs confirming, and the policy."""
    kind, spec, act = context["kind"], context["tool"], context["action"]
    return {
        **context,
        "raw": raw,
        "args_json": json.dumps(args, indent=2, ensure_ascii=False),
        "why": gate.why_irreversible(spec.name, act),
        "digest": args_digest(kind=kind, name=spec.name, action=act.name, args=args),
        "error": None,
        "has_passkey": stepup.has_passkey(platform, actor.operator or ""),
        "policy": policy_for(platform.settings, act),
    }
