"""The dashboard's pulse on every page (SPEC §25): how many calls wait, for the tab's title,
its favicon badge and desktop notifications; and the favicon itself.

Every page's script (static/app.js) reads `/approvals/pulse` every two seconds; when that
read fails the page says the connection is lost and disables its buttons until it answers
again. The favicon is drawn here as SVG with the count it is given, so a badge needs no
canvas and no inline image under the CSP; it shows only the number the page asked for.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import RedirectResponse, Response

from dashboard import data
from dashboard.deps import OperatorDep, PlatformDep

router = APIRouter()
ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect x="1" y="1" width="30" height="30" rx="7" fill="#1f5fbf"/>'
    '<path d="M9 17l5 5 9-11" fill="none" stroke="#fff" stroke-width="4" '
    'stroke-linecap="round" stroke-linejoin="round"/>{badge}</svg>'
)
BADGE = (
    '<circle cx="22" cy="10" r="10" fill="#b42318"/>'
    '<text x="22" y="14.5" font-size="{size}" font-family="sans-serif" font-weight="700" '
    'fill="#fff" text-anchor="middle">{text}</text>'
)


@router.get("/approvals/pulse")
def pulse(platform: PlatformDep, _operator: OperatorDep) -> dict[str, int]:
    """How many calls wait for a decision, and the newest one's id (0: none)."""
    return {"pending": data.pending_count(platform), "newest": platform.jobs.newest_pending_id()}


@router.get("/favicon.svg")
def favicon(n: int = 0) -> Response:
    """aat's icon, with a badge showing `n` (the pending count the page read) when above 0."""
    text = "99+" if n > 99 else str(n)
    size = 13 if len(text) == 1 else 10 if len(text) == 2 else 8
    badge = BADGE.format(size=size, text=text) if n > 0 else ""
    return Response(
        ICON.format(badge=badge),
        media_type="image/svg+xml",
        headers={"cache-control": "public, max-age=86400"},
    )


@router.get("/favicon.ico")
def favicon_ico() -> Response:
    """Browsers that ask for /favicon.ico on their own get the SVG icon (a relative
    redirect, so it stays under the root path)."""
    return RedirectResponse("favicon.svg", status_code=308)
