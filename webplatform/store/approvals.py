"""Each operator's approval of a job, kept one row each until the job has all it needs."""

from __future__ import annotations

from collections.abc import Iterable

from sqlmodel import Session, col, select

from webplatform.store.models import JobApproval


def approvals_of(*, session: Session, job_id: int) -> list[JobApproval]:
    """The approvals a job has collected, oldest first."""
    stmt = select(JobApproval).where(JobApproval.job_id == job_id).order_by(col(JobApproval.id))
    return list(session.exec(stmt).all())


def approvals_for(*, session: Session, job_ids: Iterable[int]) -> dict[int, list[str]]:
    """Who approved each of `job_ids` so far, oldest first (jobs with none are left out)."""
    ids = list(job_ids)
    if not ids:
        return {}
    stmt = select(JobApproval).where(col(JobApproval.job_id).in_(ids)).order_by(col(JobApproval.id))
    out: dict[int, list[str]] = {}
    for row in session.exec(stmt).all():
        out.setdefault(row.job_id, []).append(row.operator)
    return out


def add_approval(*, session: Session, row: JobApproval) -> JobApproval:
    """Record one operator's approval (a unique key refuses a second one for the same job)."""
    session.add(row)
    session.flush()
    return row
