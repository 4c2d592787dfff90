"""Liveness and readiness for load balancers and scripts: the JSON endpoints that need no login."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool

from dashboard.deps import PlatformDep

router = APIRouter()


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Always `{"status": "ok"}` while the process serves requests."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(platform: PlatformDep) -> JSONResponse:
    """`{"status": "ready"}` (200) when the database answers and its schema is current, else
    503 with the reason in one line: a balancer sends this replica nothing until then."""

    def check() -> str | None:
        try:
            return platform.readiness_problem()
        except SQLAlchemyError as exc:
            first = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or ["?"])[0]
            return f"the database does not answer: {first}"

    problem = await run_in_threadpool(check)
    if problem is not None:
        return JSONResponse({"status": "unready", "reason": problem}, status_code=503)
    return JSONResponse({"status": "ready"})
