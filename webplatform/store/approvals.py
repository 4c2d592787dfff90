"""Each operator's approval of a job, kept one row each until the job has all it needs.

Each row is signed with aat's key when aat records it (`webplatform.store.seals`); who
approved a job is read only from rows that verify (`verified`), so a row inserted by SQL
is no approval.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlmodel import Session, col, delete, select

from webplatform.store.models import JobApproval
from webplatform.store.seals import RowSeal, row_holds, sign_row


def approvals_of(*, session: Session, job_id: int) -> list[JobApproval]:
    """The approvals a job has collected, oldest first."""
    stmt = select(JobApproval).where(JobApproval.job_id == job_id).order_by(col(JobApproval.id))
    return list(session.exec(stmt).all())


def approvals_for(*, session: Session, job_ids: Iterable[int]) -> dict[int, list[JobApproval]]:
    """The approvals each of `job_ids` collected, oldest first (jobs with none are left out)."""
    ids = list(job_ids)
    if not ids:
        return {}
    stmt = select(JobApproval).where(col(JobApproval.job_id).in_(ids)).order_by(col(JobApproval.id))
    out: dict[int, list[JobApproval]] = {}
    for row in session.exec(stmt).all():
        out.setdefault(row.job_id, []).append(row)
    return out


def verified(rows: Iterable[JobApproval], *, seal: RowSeal, job_id: int, digest: str) -> list[str]:
    """Who approved job `job_id`'s call `digest`, from the `rows` whose signature verifies,
    oldest first; any other row is no approval (and is noted for the audit trail, once)."""
    return [
        row.operator
        for row in rows
        if row.job_id == job_id and row.digest == digest and row_holds(seal, row)
    ]


def add_approval(*, session: Session, row: JobApproval, seal: RowSeal) -> JobApproval:
    """Record one operator's approval, signed with `seal` (a unique key refuses a second one
    for the same job). Call it once the decision point found no approval of theirs that
    verifies: a row in their name that does not (inserted by SQL) is replaced."""
    session.exec(
        delete(JobApproval).where(
            col(JobApproval.job_id) == row.job_id, col(JobApproval.operator) == row.operator
        )
    )
    sign_row(seal, row)
    session.add(row)
    session.flush()
    return row


def forget_approvals(*, session: Session, job_id: int) -> int:
    """Delete every approval job `job_id` collected (it waits for new ones: SPEC §20); how many."""
    stmt = delete(JobApproval).where(col(JobApproval.job_id) == job_id)
    return int(session.exec(stmt).rowcount)
