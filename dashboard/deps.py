"""What routes receive: the platform, the page renderer, the operator, the caller's address.

Routes declare these as `Annotated` parameters and stay thin; the values are put on
`app.state` by `create_app` and on `request.state` by the security guard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from dashboard import auth, stepup
from dashboard.auth import LoginLimiter
from dashboard.data import JobFilters, operator_role, parse_filters
from dashboard.passkeys import RelyingParty, relying_party
from dashboard.render import Pages
from webplatform.platform import Actor, Platform
from webplatform.registry import ToolSpec
from webplatform.registry.model import RunnableKind
from webplatform.store.models import Surface
from webplatform.trust import permissions
from webplatform.trust.permissions import Decider, Permission, may


def get_platform(request: Request) -> Platform:
    """The process's platform (settings, database, registry)."""
    platform: Platform = request.app.state.platform
    return platform


def get_pages(request: Request) -> Pages:
    """The template renderer."""
    pages: Pages = request.app.state.pages
    return pages


def current_operator(request: Request) -> str:
    """The logged-in operator's name; the guard has already refused anyone else."""
    name = getattr(request.state, "operator", None)
    if not name:
        raise HTTPException(status_code=403, detail="log in first")
    return str(name)


def current_actor(request: Request) -> Decider:
    """The logged-in operator as `may` judges them (their role read once per request)."""
    name = current_operator(request)
    if not hasattr(request.state, "role"):
        request.state.role = operator_role(get_platform(request), name)
    return Decider(name=name, role=request.state.role)


def permitted(request: Request, permission: Permission) -> bool:
    """Whether the logged-in operator may do `permission` (`trust.permissions.may`)."""
    return may(current_actor(request), permission)


class PermissionRefused(HTTPException):
    """403: `actor` may not do `permission`. Answered by a page (an htmx fragment for
    `#notice`) naming the permission and who can grant it (`dashboard.errors`)."""

    def __init__(self, actor: Decider, permission: Permission) -> None:
        super().__init__(status_code=403, detail=permissions.refusal(actor, permission))
        self.actor = actor
        self.permission = permission


@dataclass(frozen=True)
class Requires:
    """A route's dependency on `permission`: the logged-in operator's name when they may do
    it; 403 with the reason otherwise, whatever the page they came from showed. One per
    permission a route needs (`DeciderDep`, `RuleMakerDep`, ... below)."""

    permission: Permission

    def __call__(self, request: Request) -> str:
        """The operator's name, or PermissionRefused (403)."""
        actor = current_actor(request)
        if not may(actor, self.permission):
            raise PermissionRefused(actor, self.permission)
        return actor.name


def client_address(request: Request) -> str | None:
    """The caller's address, for audit events."""
    return request.client.host if request.client else None


def get_relying_party(request: Request) -> RelyingParty:
    """Where the browser is, for WebAuthn (the Host header was checked by the guard)."""
    settings = get_platform(request).settings
    return relying_party(settings, request.url.scheme, request.headers.get("host", ""))


def get_limiter(request: Request) -> LoginLimiter:
    """The password throttle: logins count on their name and address, passwords typed to
    approve or change something on their session (`stepup.Checker`)."""
    limiter: LoginLimiter = request.app.state.login_limiter
    return limiter


def job_filters(
    state: str | None = None,
    tool: str | None = None,
    surface: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> JobFilters:
    """The job-history filters of the query string (the jobs page and its exports)."""
    return parse_filters(state=state, tool=tool, surface=surface, since=since, until=until)


def dashboard_actor(request: Request) -> Actor:
    """The logged-in operator as the requester of a run (never a viewer: 403)."""
    return Actor(
        surface=Surface.dashboard,
        operator=Requires(Permission.run)(request),
        address=client_address(request),
    )


@dataclass(frozen=True)
class Runnable:
    """A tool or agent named in the URL (`/registry/{kind}/{name}`, `/run/{kind}/{name}/...`)."""

    kind: RunnableKind
    spec: ToolSpec


def find_runnable(request: Request, kind: str, name: str) -> Runnable:
    """The tool or agent the path names, or a 404 page that says where to look."""
    if kind not in ("tool", "agent"):
        raise HTTPException(404, f"no registry section {kind!r}: use tool or agent")
    runnable: RunnableKind = "agent" if kind == "agent" else "tool"
    spec = get_platform(request).registry().runnable(runnable, name)
    if spec is None:
        raise HTTPException(404, f"no {kind} named {name!r}; the registry page lists them all")
    return Runnable(kind=runnable, spec=spec)


PlatformDep = Annotated[Platform, Depends(get_platform)]
PagesDep = Annotated[Pages, Depends(get_pages)]
OperatorDep = Annotated[str, Depends(current_operator)]
# The operator, for a POST that decides or denies (a viewer is refused with 403), for the
# Rules page and what makes a rule, the agent tokens page, changing another operator's role,
# and accepting an upstream server's tool definitions.
DeciderDep = Annotated[str, Depends(Requires(Permission.approve))]
DenierDep = Annotated[str, Depends(Requires(Permission.deny))]
RuleMakerDep = Annotated[str, Depends(Requires(Permission.make_rules))]
TokenMinterDep = Annotated[str, Depends(Requires(Permission.mint_tokens))]
OperatorManagerDep = Annotated[str, Depends(Requires(Permission.manage_operators))]
ServerAccepterDep = Annotated[str, Depends(Requires(Permission.accept_server_tools))]
AddressDep = Annotated[str | None, Depends(client_address)]
ActorDep = Annotated[Actor, Depends(dashboard_actor)]
FiltersDep = Annotated[JobFilters, Depends(job_filters)]
RunnableDep = Annotated[Runnable, Depends(find_runnable)]
RelyingPartyDep = Annotated[RelyingParty, Depends(get_relying_party)]
LimiterDep = Annotated[LoginLimiter, Depends(get_limiter)]


@dataclass(frozen=True)
class View:
    """What a handler answers with: the request, the platform, and the page renderer."""

    request: Request
    platform: Platform
    pages: Pages


def get_view(request: Request, platform: PlatformDep, pages: PagesDep) -> View:
    """The request, the platform and the renderer, as one value for handlers and helpers."""
    return View(request=request, platform=platform, pages=pages)


def get_checker(
    request: Request, platform: PlatformDep, limiter: LimiterDep, rp: RelyingPartyDep
) -> stepup.Checker:
    """What checks a step-up sent with this request: the platform, the password throttle and
    the session its count is kept on, and the relying party the browser's passkeys are for."""
    session = auth.session_key(request.cookies.get(auth.SESSION_COOKIE, ""))
    return stepup.Checker(platform=platform, limiter=limiter, rp=rp, session=session)


ViewDep = Annotated[View, Depends(get_view)]
CheckerDep = Annotated[stepup.Checker, Depends(get_checker)]
