"""Error pages: an unknown page or job is a page that says so, never a stack trace."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from dashboard.render import Pages
from webplatform.mcp.transports.oauth import SignInRefused


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

    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(SignInRefused, sign_in_refused)
    app.add_exception_handler(RequestValidationError, bad_request)
