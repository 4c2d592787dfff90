"""The overview: what waits for a decision, what ran lately, what is broken in the registry."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from dashboard import data
from dashboard.deps import OperatorDep, PagesDep, PlatformDep
from webplatform.registry import secret_status

router = APIRouter()


@router.get("/")
def overview(
    request: Request, platform: PlatformDep, pages: PagesDep, _operator: OperatorDep
) -> Response:
    """Pending approvals, recent jobs and registry health on one page."""
    registry = platform.registry()
    missing = [
        (kind, spec.name, name)
        for kind, specs in (("tool", registry.tools), ("agent", registry.agents))
        for spec in specs.values()
        for name, present in secret_status(spec).items()
        if not present
    ]
    queue = data.approval_queue(platform, history=0)
    recent = data.job_page(platform=platform, filters=data.JobFilters(), before_id=None, limit=10)
    return pages.render(
        request,
        "overview.html",
        {
            "pending": [card.job for card in queue.pending],
            "pending_count": queue.total,
            "recent": recent,
            "registry": registry,
            "missing_secrets": missing,
        },
    )
