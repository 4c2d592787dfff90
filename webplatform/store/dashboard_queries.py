"""Queries only the dashboard needs: the approval history under the live queue.

Kept apart from `jobs.py` so the dashboard's views can grow without touching the job state
machine; like every module in `webplatform.store`, it is a place SQL is allowed.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import or_
from sqlalchemy.orm import load_only
from sqlmodel import Session, col, select

from webplatform.store.models import JOB_DECISION_COLUMNS, Job, JobState


def recent_decisions(*, session: Session, limit: int) -> Sequence[Job]:
    """Irreversible jobs that left the queue (decided, expired or cancelled), newest first,
    without their arguments, results or output."""
    stmt = (
        select(Job)
        .options(load_only(*(getattr(Job, name) for name in JOB_DECISION_COLUMNS)))
        .where(col(Job.irreversible).is_(True))
        .where(col(Job.state) != JobState.pending_approval)
        .where(or_(col(Job.decided_at).is_not(None), col(Job.state) == JobState.expired))
        .order_by(col(Job.updated_at).desc(), col(Job.id).desc())
        .limit(limit)
    )
    return session.exec(stmt).all()
