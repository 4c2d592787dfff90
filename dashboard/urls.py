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
    """The path of the named route (or `static` file, with `path=`), under the root path."""
    return request.url_for(name, **params).path


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
