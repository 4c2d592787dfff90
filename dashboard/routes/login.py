"""Log in, log out, and first-run setup."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Form, Request
from starlette.responses import RedirectResponse, Response

from dashboard import auth, setup
from dashboard.deps import AddressDep, OperatorDep, PagesDep, PlatformDep
from dashboard.forms import LoginForm, SetupForm
from dashboard.urls import under_root, url_for

router = APIRouter()


def _safe_next(target: str | None) -> str:
    """Only a path on this site: `next=https://evil.example` must not redirect away.

    It is a path inside the app (no root path); the redirect puts the root path in front."""
    if not target:
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def _secure(platform: PlatformDep) -> bool:
    return platform.settings.dashboard_url.startswith("https://")


@router.get("/login")
def login_form(request: Request, pages: PagesDep, next: str | None = None) -> Response:
    """The login form (fields `username` and `password`)."""
    return pages.render(request, "login.html", {"next": _safe_next(next), "error": None})


@router.post("/login")
def login(
    request: Request,
    platform: PlatformDep,
    pages: PagesDep,
    address: AddressDep,
    form: Annotated[LoginForm, Form()],
) -> Response:
    """Check the password (rate-limited); on success set the session cookie and go on."""
    username, password, next = form.username, form.password, form.next
    limiter: auth.LoginLimiter = request.app.state.login_limiter
    keys = (f"addr:{address}", f"user:{username}")
    wait = limiter.attempt(*keys)
    if wait > 0:
        return pages.render(
            request,
            "login.html",
            {
                "next": _safe_next(next),
                "error": f"too many failed logins: wait {int(wait) + 1} s and try again",
            },
            status_code=429,
            headers={"Retry-After": str(int(wait) + 1)},
        )
    token = auth.log_in(platform=platform, username=username, password=password, address=address)
    if token is None:
        return pages.render(
            request,
            "login.html",
            {
                "next": _safe_next(next),
                "error": "wrong user name or password",
                "username": username,
            },
            status_code=401,
        )
    limiter.succeeded(*keys)
    response = RedirectResponse(under_root(request.scope, _safe_next(next)), status_code=303)
    auth.set_session_cookie(response, token, secure=_secure(platform))
    return response


@router.post("/logout")
def logout(
    request: Request, platform: PlatformDep, operator: OperatorDep, address: AddressDep
) -> Response:
    """End this browser's session."""
    token = request.cookies.get(auth.SESSION_COOKIE, "")
    auth.log_out(platform=platform, token=token, operator=operator, address=address)
    response = RedirectResponse(url_for(request, "login_form"), status_code=303)
    auth.clear_session_cookie(response, secure=_secure(platform))
    return response


@router.get("/setup")
def setup_form(
    request: Request, platform: PlatformDep, pages: PagesDep, token: str = ""
) -> Response:
    """First-run setup: create the first operator, with the link `aat serve` printed."""
    if not setup.setup_open(platform, token):
        return pages.render(
            request,
            "message.html",
            {
                "title": "Setup",
                "message": "this setup link is not valid (or setup is done): "
                "log in, or use the latest link `aat serve` printed",
            },
            status_code=404,
        )
    return pages.render(request, "setup.html", {"token": token, "error": None})


@router.post("/setup")
def setup_submit(
    request: Request,
    platform: PlatformDep,
    pages: PagesDep,
    form: Annotated[SetupForm, Form()],
) -> Response:
    """Create the first operator and log them in; the link stops working."""
    token, username, password, password2 = form.token, form.username, form.password, form.password2
    error = "the two passwords differ" if password != password2 else None
    error = error or setup.complete_setup(
        platform=platform, token=token, username=username, password=password
    )
    if error:
        return pages.render(
            request,
            "setup.html",
            {"token": token, "error": error, "username": username},
            status_code=400,
        )
    response = RedirectResponse(url_for(request, "overview"), status_code=303)
    session_token = auth.start_browser_session(platform=platform, operator=username)
    auth.set_session_cookie(response, session_token, secure=_secure(platform))
    return response
