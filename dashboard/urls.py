"""The dashboard's URLs, all under its root path (`aat serve --root-path`, `AAT_ROOT_PATH`).

Behind a reverse proxy that strips `/PREFIX`, the app sees `/approvals` but the browser must
be sent to `/PREFIX/approvals`. As ASGI 2.3 and Starlette expect, the root path goes into
the scope (`root_path`, and at the front of `path`); routing strips it again, and every URL
the dashboard hands out is built here from route names (`url_for`) or from app-local paths
(`under_root`), so none escapes the prefix. Templates get `url_for` too, and never spell a
path by hand.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, NoMatchFound, Router
from starlette.types import ASGIApp, Receive, Scope, Send


def root_path(scope: Scope) -> str:
    """The prefix the dashboard is served under ("" when none)."""
    return str(scope.get("app_root_path") or scope.get("root_path") or "")


def route_path(scope: Scope) -> str:
    """The request's path inside the app, without the root path (`/approvals`)."""
    path: str = scope["path"]
    root = root_path(scope)
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


def under_root(scope: Scope, local: str) -> str:
    """An app-local path (`/login?next=...`) as the browser must ask for it."""
    return root_path(scope) + local


def url_for(request: Request, name: str, /, **params: Any) -> str:
    """The path of the named route (or `static` file, with `path=`), under the root path.

    What `request.url_for(name, **params).path` gives, without its cost: Starlette tries every
    route in turn (an exception per route that is not the one) and builds a whole URL from the
    request's headers, about 0.1 ms a link, and the approvals page makes hundreds of links.
    Here the routes named `name` are looked up in an index, in the router's order.
    """
    router = request.scope.get("router")
    if router is None:
        return request.url_for(name, **params).path
    for route in _named(router).get(name, ()):
        try:
            path = route.url_path_for(name, **params)
        except NoMatchFound:
            continue
        if path.host:
            break  # a route on another host: leave it to Starlette
        scope = request.scope
        return str(scope.get("app_root_path", scope.get("root_path", ""))).rstrip("/") + path
    return request.url_for(name, **params).path


# Where a router keeps its routes by name (a Mount by its own name), in order, with the count
# of routes it was made from: made again when routes change.
_INDEX = "_aat_routes_by_name"


def _named(router: Router) -> dict[str, list[BaseRoute]]:
    count = len(router.routes)
    kept: tuple[int, dict[str, list[BaseRoute]]] | None = getattr(router, _INDEX, None)
    if kept is not None and kept[0] == count:
        return kept[1]
    index: dict[str, list[BaseRoute]] = {}
    for route in router.routes:
        name = getattr(route, "name", None)
        if isinstance(name, str):
            index.setdefault(name, []).append(route)
    setattr(router, _INDEX, (count, index))
    return index


class RootPath:
    """ASGI middleware: serve the app under `root` when the server did not say so itself.

    A server started with its own root path (`uvicorn --root-path`) already put it in the
    scope; then this does nothing.
    """

    def __init__(self, app: ASGIApp, *, root: str) -> None:
        self.app = app
        self.root = root

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with `root_path` set and `path` carrying it in front."""
        if self.root and scope["type"] in ("http", "websocket") and not scope.get("root_path"):
            scope = dict(scope)
            scope["root_path"] = self.root
            scope["path"] = self.root + scope["path"]
            raw = scope.get("raw_path")
            if raw is not None:
                scope["raw_path"] = self.root.encode() + raw
        await self.app(scope, receive, send)
