"""Upstream MCP servers (SPEC §22): each server's page, with its tools, their state, their
pinned digests and the difference of a held definition. Accepting is `aat servers accept`."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from starlette.responses import Response

from dashboard.deps import OperatorDep, PagesDep, PlatformDep
from webplatform import servers

router = APIRouter()


@router.get("/servers/{name}")
def server_page(
    request: Request, platform: PlatformDep, pages: PagesDep, _operator: OperatorDep, name: str
) -> Response:
    """One upstream server as the store pinned it (the page does not start the server)."""
    try:
        shown = servers.details(platform, name, connect=False)
    except servers.ServerProblem as exc:
        raise HTTPException(404, str(exc)) from exc
    server = platform.registry().servers[name]
    where = server.url or " ".join(server.command)
    return pages.render(request, "server.html", {"server": shown, "where": where})
