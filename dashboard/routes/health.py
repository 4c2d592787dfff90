"""Liveness for load balancers and scripts; the one JSON endpoint that needs no login."""

from fastapi import APIRouter

router = APIRouter()


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Always `{"status": "ok"}` while the process serves requests."""
    return {"status": "ok"}
