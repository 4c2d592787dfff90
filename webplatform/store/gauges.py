"""What the database knows for every process, read when Prometheus scrapes `/metrics`."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, col, select

from webplatform.store.models import Job

__all__ = ["jobs_by_state"]


def jobs_by_state(*, session: Session) -> dict[str, int]:
    """How many jobs the database holds in each state (retention removes old ones)."""
    stmt = select(col(Job.state), func.count()).group_by(col(Job.state))
    return {str(getattr(state, "value", state)): int(n) for state, n in session.exec(stmt)}
