"""The operator's account page: their passkeys (list, add, remove), and the WebAuthn
endpoints the page's script calls (`static/passkeys.js`): registration, and challenges for
approving one call with a passkey.

The JSON endpoints are POSTs like every state change, so the guard's same-origin and CSRF
(`X-CSRF-Token` header) checks apply to them too.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, RedirectResponse, Response

from dashboard import passkeys
from dashboard.deps import OperatorDep, PagesDep, PlatformDep, RelyingPartyDep
from dashboard.urls import url_for
from webplatform.store import passkeys as store

router = APIRouter()
PURPOSES = ("approve", "run")


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {}


def _error(text: str, status_code: int = 400) -> JSONResponse:
    return JSONResponse({"error": text}, status_code=status_code)


@router.get("/account")
def account_page(
    request: Request,
    platform: PlatformDep,
    pages: PagesDep,
    operator: OperatorDep,
    rp: RelyingPartyDep,
    done: str | None = None,
) -> Response:
    """The operator's passkeys, and a button to add one (when reached at `localhost`)."""
    keys = platform.transact(
        lambda session: store.list_passkeys(session=session, operator=operator), write=False
    )
    port = request.url.port
    return pages.render(
        request,
        "account.html",
        {
            "passkeys": keys,
            "usable": rp.usable,
            "localhost_url": f"{request.url.scheme}://{passkeys.RP_ID}"
            + (f":{port}" if port else "")
            + "/account",
            "message": {"added": "Passkey added.", "removed": "Passkey removed."}.get(done or ""),
            "error": None,
        },
    )


@router.post("/account/passkeys/options")
async def registration_options(
    platform: PlatformDep, operator: OperatorDep, rp: RelyingPartyDep
) -> Response:
    """Options for `navigator.credentials.create` (a fresh, stored, single-use challenge)."""
    try:
        options = await run_in_threadpool(
            passkeys.registration_options, platform=platform, rp=rp, operator=operator
        )
    except passkeys.PasskeyError as exc:
        return _error(str(exc))
    return Response(options, media_type="application/json")


@router.post("/account/passkeys")
async def add_passkey(
    request: Request, platform: PlatformDep, operator: OperatorDep, rp: RelyingPartyDep
) -> Response:
    """Verify the browser's registration response and keep the passkey's public key."""
    body = await _json_body(request)
    credential, label = body.get("credential"), body.get("label")
    if not isinstance(credential, dict):
        return _error("send {credential: <PublicKeyCredential.toJSON()>, label: <name>}")
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
        return _error(str(exc))
    return JSONResponse({"id": key.id, "label": key.label})


@router.post("/account/passkeys/{passkey_id}/remove")
def remove_passkey(
    request: Request, platform: PlatformDep, operator: OperatorDep, passkey_id: int
) -> Response:
    """Forget one of your passkeys (approving then needs your password or another passkey)."""
    platform.transact(
        lambda session: store.remove_passkey(
            session=session, operator=operator, passkey_id=passkey_id
        )
    )
    return RedirectResponse(url_for(request, "account_page") + "?done=removed", status_code=303)


@router.post("/stepup/options")
async def step_up_options(
    request: Request, platform: PlatformDep, operator: OperatorDep, rp: RelyingPartyDep
) -> Response:
    """Options for `navigator.credentials.get`, with a challenge that can approve only the
    call with this digest (and this job, for a queued one), once, within two minutes."""
    body = await _json_body(request)
    purpose, digest, job_id = body.get("purpose"), body.get("digest"), body.get("job_id")
    if purpose not in PURPOSES or not isinstance(digest, str) or len(digest) != 64:
        return _error("send {purpose: approve|run, digest: <the call's sha256>, job_id}")
    if purpose == "approve" and not isinstance(job_id, int):
        return _error("approving with a passkey needs the job_id")
    try:
        options = await run_in_threadpool(
            passkeys.assertion_options,
            platform=platform,
            rp=rp,
            operator=operator,
            purpose=purpose,
            digest=digest,
            job_id=job_id if purpose == "approve" else None,
        )
    except passkeys.PasskeyError as exc:
        return _error(str(exc))
    return Response(options, media_type="application/json")
