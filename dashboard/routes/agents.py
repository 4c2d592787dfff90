"""The Agents page: mint agent tokens (shown once), list them with their last use, revoke.

Admin-only (`AdminDep`). A minted token is in exactly one response, marked `no-store`; only
its hash is kept.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from starlette.responses import Response

from dashboard.deps import AdminDep, PagesDep, PlatformDep
from dashboard.render import Pages
from webplatform.platform import Platform
from webplatform.store import agents

router = APIRouter()


def render_agents(
    request: Request,
    platform: Platform,
    pages: Pages,
    *,
    minted: tuple[str, str] | None = None,
    message: str | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    """The page: every token (never a hash), and a just-minted token when there is one."""
    rows = platform.transact(lambda s: agents.list_agents(session=s), write=False)
    response = pages.render(
        request,
        "agents.html",
        {"agents": rows, "minted": minted, "message": message, "error": error},
        status_code=status_code,
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/agents")
def agents_page(
    request: Request, platform: PlatformDep, pages: PagesDep, _admin: AdminDep
) -> Response:
    """The agent tokens and the form to mint one."""
    return render_agents(request, platform, pages)


@router.post("/agents")
def mint_agent(
    request: Request,
    platform: PlatformDep,
    pages: PagesDep,
    admin: AdminDep,
    name: Annotated[str, Form()] = "",
) -> Response:
    """Mint a token owned by the logged-in operator; the page shows it this once."""
    try:
        _row, token = platform.transact(
            lambda s: agents.add_agent(session=s, name=name.strip(), owner=admin, actor=admin)
        )
    except agents.AgentTokenError as exc:
        return render_agents(request, platform, pages, error=str(exc), status_code=422)
    return render_agents(request, platform, pages, minted=(name.strip(), token))


@router.post("/agents/{name}/revoke")
def revoke_agent(
    request: Request, platform: PlatformDep, pages: PagesDep, admin: AdminDep, name: str
) -> Response:
    """Revoke a token: its next `/mcp` request gets 401."""
    if not platform.transact(lambda s: agents.revoke_agent(session=s, name=name, actor=admin)):
        return render_agents(
            request, platform, pages, error=f"no active agent {name!r}", status_code=409
        )
    return render_agents(request, platform, pages, message=f"Revoked agent {name}.")
