"""The operator's account page: their passkeys (list, add, remove) and password, and for
admins the operators' roles; and the WebAuthn endpoints the page's script calls
(`static/passkeys.js`) to register a passkey (step-up challenges: `dashboard.routes.stepup`).

Every change here changes who may decide, so each needs a step-up bound to that change
(`dashboard.stepup.for_change`): the current password typed with it, or an assertion from an
existing passkey. The first passkey needs the password. The JSON endpoints are POSTs like
every state change, so the guard's same-origin and CSRF (`X-CSRF-Token`) checks apply too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated

from fastapi import APIRouter, Form, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, RedirectResponse, Response

from dashboard import auth, passkeys, stepup
from dashboard.deps import (
    AddressDep,
    OperatorDep,
    OperatorManagerDep,
    PlatformDep,
    RelyingPartyDep,
    View,
    ViewDep,
    get_checker,
    get_limiter,
    get_pages,
    get_platform,
    get_relying_party,
    permitted,
)
from dashboard.forms import PasswordForm, ProofForm, RoleForm
from dashboard.render import QUIET, Notice, json_body, json_error
from dashboard.urls import url_for
from webplatform.store import operators
from webplatform.trust import changes
from webplatform.trust.authority import report_forged
from webplatform.trust.permissions import ROLE_BOOK, Permission
from webplatform.trust.stepup import Change, StepUp, StepUpMismatch

router = APIRouter()
DONE = {
    "added": "Passkey added.",
    "removed": "Passkey removed.",
    "password": "Password changed; your other sessions were logged out.",
    "role": "Role changed.",
}


def render_account(
    view: View,
    operator: str,
    notice: Notice = QUIET,
) -> Response:
    """The account page: passkeys (unsigned rows marked), password, and operators for admins."""
    request, platform = view.request, view.platform
    keys = platform.passkeys.all_of(operator)
    people = platform.operators.listed() if permitted(request, Permission.manage_operators) else []
    report_forged(platform)
    rp = get_relying_party(request)
    context = {
        "passkeys": keys,
        "has_passkey": any(signed and key.rp_id == rp.rp_id for key, signed in keys),
        "operators": people,
        "roles": ROLE_BOOK.roles,
        "usable": rp.usable,
        "rp_id": rp.rp_id,
        "rp_url": f"{rp.home}/account",
        **notice.shown(),
    }
    return view.pages.render(request, "account.html", context, status_code=notice.status)


@router.get("/account")
def account_page(view: ViewDep, operator: OperatorDep, done: str | None = None) -> Response:
    """The operator's passkeys and password form, and (admins) the operators' roles."""
    return render_account(view, operator, Notice(DONE.get(done or "")))


def _verify_change(
    request: Request,
    operator: str,
    change: Change,
    target: Mapping[str, str],
    proof: stepup.Proof,
    address: str | None,
) -> StepUp:
    """The step-up for `change`; raises StepUpRefused when the proof does not hold."""
    return stepup.verify(
        get_checker(
            request, get_platform(request), get_limiter(request), get_relying_party(request)
        ),
        operator=operator,
        proof=proof,
        bound=stepup.for_change(operator, change, target),
        address=address,
    )


def _refused(request: Request, operator: str, exc: Exception) -> Response:
    """The account page with why a change was refused: 403 without a valid step-up, 422
    when the change itself is wrong."""
    step_up_missing = isinstance(exc, stepup.StepUpRefused | StepUpMismatch)
    return render_account(
        View(request=request, platform=get_platform(request), pages=get_pages(request)),
        operator,
        Notice.refused(str(exc), 403 if step_up_missing else 422),
    )


@router.post("/account/passkeys/options")
async def registration_options(
    request: Request,
    platform: PlatformDep,
    operator: OperatorDep,
    rp: RelyingPartyDep,
    address: AddressDep,
) -> Response:
    """Options for `navigator.credentials.create` (a fresh, stored, single-use challenge),
    only for a request that carries the operator's password or an assertion from one of
    their passkeys, bound to registering a passkey."""
    body = await json_body(request)
    password, passkey = body.get("password"), body.get("passkey")
    proof = stepup.Proof(
        password=password if isinstance(password, str) else "",
        passkey=json.dumps(passkey) if isinstance(passkey, dict) else "",
    )
    try:
        passkeys.require_usable(rp)  # at any other name no passkey can be made: ask nothing
        step_up = await run_in_threadpool(
            _verify_change, request, operator, Change.passkey_add, {}, proof, address
        )
        options = await run_in_threadpool(
            passkeys.registration_options,
            platform=platform,
            rp=rp,
            operator=operator,
            step_up=step_up,
        )
    except stepup.StepUpRefused as exc:
        return json_error(str(exc), status_code=403)
    except (passkeys.PasskeyError, StepUpMismatch) as exc:
        return json_error(str(exc))
    return Response(options, media_type="application/json")


@router.post("/account/passkeys")
async def add_passkey(
    request: Request, platform: PlatformDep, operator: OperatorDep, rp: RelyingPartyDep
) -> Response:
    """Verify the browser's registration response and keep the passkey's public key (its
    challenge was issued only after the step-up)."""
    body = await json_body(request)
    credential, label = body.get("credential"), body.get("label")
    if not isinstance(credential, dict):
        return json_error("send {credential: <PublicKeyCredential.toJSON()>, label: <name>}")
    try:
        key = await run_in_threadpool(
            passkeys.register,
            platform=platform,
            rp=rp,
            operator=operator,
            credential_json=json.dumps(credential),
            label=label if isinstance(label, str) else "",
        )
    except passkeys.PasskeyError as exc:
        return json_error(str(exc))
    return JSONResponse({"id": key.id, "label": key.label})


@router.post("/account/passkeys/{passkey_id}/remove")
def remove_passkey(
    request: Request,
    platform: PlatformDep,
    operator: OperatorDep,
    address: AddressDep,
    passkey_id: int,
    form: Annotated[ProofForm, Form()],
) -> Response:
    """Forget one of your passkeys, with your password or another passkey."""
    target = {"passkey": str(passkey_id)}
    try:
        step_up = _verify_change(
            request,
            operator,
            Change.passkey_remove,
            target,
            form.proof(),
            address,
        )
        changes.remove_passkey(
            platform=platform, step_up=step_up, by=operator, passkey_id=passkey_id
        )
    except (stepup.StepUpRefused, StepUpMismatch) as exc:
        return _refused(request, operator, exc)
    return RedirectResponse(url_for(request, "account_page") + "?done=removed", status_code=303)


@router.post("/account/password")
def change_password(
    request: Request,
    platform: PlatformDep,
    operator: OperatorDep,
    address: AddressDep,
    form: Annotated[PasswordForm, Form()],
) -> Response:
    """Change your password, confirmed with the current one (or a passkey); every session
    of yours ends, and this browser gets a new one."""
    try:
        if form.new_password != form.new_password2:
            raise operators.OperatorError("the two new passwords differ: type the same one twice")
        step_up = _verify_change(
            request,
            operator,
            Change.password,
            {},
            form.proof(),
            address,
        )
        changes.set_password(
            platform=platform, step_up=step_up, by=operator, password=form.new_password
        )
    except (stepup.StepUpRefused, StepUpMismatch, operators.OperatorError) as exc:
        return _refused(request, operator, exc)
    response = RedirectResponse(
        url_for(request, "account_page") + "?done=password", status_code=303
    )
    token = auth.start_browser_session(platform=platform, operator=operator)
    secure = platform.settings.dashboard_url.startswith("https://")
    auth.set_session_cookie(response, token, secure=secure)
    return response


@router.post("/operators/{name}/role")
def change_role(
    request: Request,
    platform: PlatformDep,
    admin: OperatorManagerDep,
    address: AddressDep,
    name: str,
    form: Annotated[RoleForm, Form()],
) -> Response:
    """An admin gives operator `name` a role, confirmed with their password (or passkey)."""
    try:
        step_up = _verify_change(
            request,
            admin,
            Change.role,
            {"operator": name, "role": form.role},
            form.proof(),
            address,
        )
        changes.set_role(platform=platform, step_up=step_up, by=admin, name=name, role=form.role)
    except (stepup.StepUpRefused, StepUpMismatch, operators.OperatorError) as exc:
        return _refused(request, admin, exc)
    return RedirectResponse(url_for(request, "account_page") + "?done=role", status_code=303)
