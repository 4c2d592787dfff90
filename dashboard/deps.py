"""What routes receive: the platform, the page renderer, the operator, the caller's address.

Routes declare these as `Annotated` parameters and stay thin; the values are put on
`app.state` by `create_app` and on `request.state` by the security guard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from dashboard.auth import LoginLimiter
from dashboard.data import JobFilters, parse_filters
from dashboard.passkeys import RelyingParty, relying_party
from dashboard.render import Pages
from webplatform.platform import Actor, Platform
from webplatform.registry import ToolSpec
from webplatform.registry.model import RunnableKind
from webplatform.store.models import Surface


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


def current_admin(request: Request) -> str:
    """The logged-in operator, for pages only admins may use (agent tokens).

    Every operator is an admin until operators have roles: this is the one place to narrow
    it, and every admin-only route already depends on it.
    """
    return current_operator(request)


def client_address(request: Request) -> str | None:
    """The caller's address, for audit events."""
    return request.client.host if request.client else None


def get_relying_party(request: Request) -> RelyingParty:
    """Where the browser is, for WebAuthn (the Host header was checked by the guard)."""
    return relying_party(request.url.scheme, request.headers.get("host", ""))


def get_limiter(request: Request) -> LoginLimiter:
    """The login throttle, shared by passwords typed to approve."""
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
    """The logged-in operator as the requester of a run."""
    return Actor(
        surface=Surface.dashboard,
        operator=current_operator(request),
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
AdminDep = Annotated[str, Depends(current_admin)]
AddressDep = Annotated[str | None, Depends(client_address)]
ActorDep = Annotated[Actor, Depends(dashboard_actor)]
FiltersDep = Annotated[JobFilters, Depends(job_filters)]
RunnableDep = Annotated[Runnable, Depends(find_runnable)]
RelyingPartyDep = Annotated[RelyingParty, Depends(get_relying_party)]
LimiterDep = Annotated[LoginLimiter, Depends(get_limiter)]
