"""Error pages: an unknown page or job is a page that says so, never a stack trace."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.responses import Response

from dashboard.deps import PermissionRefused
from dashboard.render import Pages, is_htmx
from webplatform.mcp.transports.oauth import SignInRefused
from webplatform.platform import Platform
from webplatform.trust.permissions import Decider, Permission, may, roles_holding

# A refusal asked for by htmx (a card's Approve, the batch bar) is said where every
# decision's answer is said, whatever the form's own target was.
NOTICE_SWAP = {"HX-Retarget": "#notice", "HX-Reswap": "innerHTML"}


def install_error_pages(app: FastAPI) -> None:
    """Render HTTP errors and malformed requests with the message template."""

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        pages: Pages = request.app.state.pages
        return pages.render(
            request,
            "message.html",
            {"title": f"{exc.status_code}", "message": exc.detail or "error"},
            status_code=exc.status_code,
            headers=dict(exc.headers or {}),
        )

    async def bad_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        pages: Pages = request.app.state.pages
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())[1:])}: {e.get('msg', '')}"
            for e in exc.errors()
        )
        return pages.render(
            request,
            "message.html",
            {"title": "Bad request", "message": f"the request was not understood ({problems})"},
            status_code=400,
        )

    async def sign_in_refused(request: Request, exc: Exception) -> Response:
        # A page, not a redirect: the client's redirect URI is not verified yet (SPEC §20).
        assert isinstance(exc, SignInRefused)
        pages: Pages = request.app.state.pages
        message = (
            f"{exc.message.rstrip('.')}. Nothing was sent back to the client: fix this and start "
            "the sign-in again from the agent."
        )
        return pages.render(
            request,
            "message.html",
            {"title": "Sign-in refused", "message": message},
            status_code=400,
        )

    app.add_exception_handler(PermissionRefused, _permission_refused)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(SignInRefused, sign_in_refused)
    app.add_exception_handler(RequestValidationError, bad_request)


async def _permission_refused(request: Request, exc: Exception) -> Response:
    """A page naming what was refused and who can grant it (SPEC §25), not a bare 403; for
    htmx, the notice alone, swapped into the page's `#notice`."""
    assert isinstance(exc, PermissionRefused)
    pages: Pages = request.app.state.pages
    granters = await run_in_threadpool(_granters, request.app.state.platform, exc.actor)
    return pages.render(
        request,
        "refused.html",
        refused_context(exc, granters),
        block="notice",
        status_code=403,
        headers=NOTICE_SWAP if is_htmx(request) else None,
    )


def _granters(platform: Platform, actor: Decider) -> list[str]:
    """The operators (signed rows only) who may give `actor` another role."""
    return [
        op.name
        for op in platform.operators.listed()
        if op.signed
        and op.name != actor.name
        and may(Decider(name=op.name, role=op.role), Permission.manage_operators)
    ]


def refused_context(exc: PermissionRefused, granters: list[str]) -> dict[str, object]:
    """What the refusal page says: the permission, why this operator lacks it, the roles
    that hold it, and who can give one of them (and the role that would do)."""
    holders = roles_holding(exc.permission)
    return {
        "title": f"Not allowed: {exc.permission.value}",
        "permission": exc.permission.value,
        "reason": exc.detail,
        "holders": holders,
        # The least role that holds it (GRANTS lists the most powerful first).
        "grant_role": holders[-1] if holders else None,
        "granter_role": " or ".join(roles_holding(Permission.manage_operators)),
        "granters": granters,
        "who": exc.actor.name,
    }
