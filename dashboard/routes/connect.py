"""The page where an operator lets an agent sign in through the browser (SPEC §18).

An MCP client that got 401 from `/mcp` sends the browser to `/authorize`, which sends it
here (`/agents/connect?request=...`; without a session the guard sends it to log in first and
back). The page shows which client asks and where it sends the browser back; the operator
names the agent and allows it with a step-up bound to this request and that name (password
or passkey), or denies it. Viewers are refused: only approvers and admins let agents in.
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Form, Query, Request
from pydantic import BaseModel
from starlette.responses import RedirectResponse, Response

from dashboard import stepup
from dashboard.deps import (
    AddressDep,
    CheckerDep,
    DeciderDep,
    OperatorDep,
    PagesDep,
    PermissionRefused,
    PlatformDep,
    ViewDep,
    current_actor,
)
from dashboard.security import CONTENT_SECURITY_POLICY
from webplatform.trust import sign_in
from webplatform.trust.permissions import Permission, may
from webplatform.trust.stepup import Change, StepUpMismatch

router = APIRouter()


class SignInAnswer(BaseModel):
    """The form: which request, allow or deny, the agent's name, and the step-up proof."""

    request: str = ""
    answer: str = "allow"
    agent: str = ""
    password: str = ""
    passkey: str = ""


_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_NETLOC = re.compile(r"[A-Za-z0-9.:\[\]-]+")


def _form_action_for(redirect_uri: str) -> str:
    """The page's CSP with the client's redirect origin allowed as a form target: allowing
    or denying ends in a redirect there, which `form-action 'self'` would block."""
    parts = urlsplit(redirect_uri)
    if not _SCHEME.fullmatch(parts.scheme) or (
        parts.netloc and not _NETLOC.fullmatch(parts.netloc)
    ):
        return CONTENT_SECURITY_POLICY
    source = f"{parts.scheme}://{parts.netloc}" if parts.netloc else f"{parts.scheme}:"
    return CONTENT_SECURITY_POLICY.replace("form-action 'self'", f"form-action 'self' {source}")


def _suggested_name(client_name: str, operator: str) -> str:
    words = re.sub(r"[^A-Za-z0-9._-]+", "-", client_name).strip("-.") or "agent"
    return f"{words[:40]}-{operator}"[:64]


def _page(
    request: Request,
    pages: PagesDep,
    found: sign_in.SignInRequest,
    *,
    agent: str = "",
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    operator = str(request.state.operator)
    context = {
        "req": found,
        "agent": agent or _suggested_name(found.client_name, operator),
        "error": error,
        "has_passkey": stepup.has_passkey(request.app.state.platform, operator),
    }
    response = pages.render(request, "connect.html", context, status_code=status_code)
    response.headers["content-security-policy"] = _form_action_for(found.redirect_uri)
    return response


def _gone(request: Request, pages: PagesDep) -> Response:
    message = (
        "this sign-in request is unknown, expired or already answered: "
        "start the sign-in again from the agent"
    )
    return pages.render(
        request, "message.html", {"title": "Sign-in", "message": message}, status_code=404
    )


@router.get("/agents/connect")
def connect_page(
    request: Request,
    platform: PlatformDep,
    pages: PagesDep,
    _operator: OperatorDep,
    request_id: Annotated[str, Query(alias="request")] = "",
) -> Response:
    """The sign-in request: who asks, where the browser goes back, the form to allow it."""
    actor = current_actor(request)
    if not may(actor, Permission.allow_sign_in):
        raise PermissionRefused(actor, Permission.allow_sign_in)
    found = sign_in.pending(platform, request_id)
    if found is None:
        return _gone(request, pages)
    return _page(request, pages, found)


@router.post("/agents/connect")
def connect_answer(
    view: ViewDep,
    decider: DeciderDep,
    checker: CheckerDep,
    address: AddressDep,
    answer: Annotated[SignInAnswer, Form()],
) -> Response:
    """Allow (with a step-up) or deny; the browser goes back to the client either way."""
    request, platform, pages = view.request, view.platform, view.pages
    found = sign_in.pending(platform, answer.request)
    if found is None:
        return _gone(request, pages)
    if answer.answer == "deny":
        target = sign_in.deny(platform=platform, by=decider, request_id=answer.request)
        return _gone(request, pages) if target is None else RedirectResponse(target, 303)
    agent = answer.agent.strip()
    try:
        step_up = stepup.verify(
            checker,
            operator=decider,
            proof=stepup.Proof(password=answer.password, passkey=answer.passkey),
            bound=stepup.for_change(
                decider, Change.agent_sign_in, sign_in.target_of(answer.request, agent)
            ),
            address=address,
        )
        target = sign_in.allow(
            platform=platform, step_up=step_up, by=decider, request_id=answer.request, agent=agent
        )
    except (stepup.StepUpRefused, StepUpMismatch) as exc:
        return _page(request, pages, found, agent=agent, error=str(exc), status_code=403)
    except sign_in.GrantError as exc:
        return _page(request, pages, found, agent=agent, error=str(exc), status_code=422)
    return RedirectResponse(target, status_code=303)
