"""Which pending jobs AAT_NOTIFY still has to be told about, claimed by compare-and-set.

Every dashboard and worker runs the same pass; the `UPDATE ... WHERE notified_at IS NULL`
lets exactly one of them claim each job, so a notification goes out once however many
processes share the database (at most once: a process that dies between the claim and the
send loses that one).
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, select, update

from webplatform.store.models import Job, JobState

_SCAN_BATCH = 200
# A reminder goes out when this share of the approval window is left.
REMIND_WHEN_LEFT = 0.2


def claim_new_pending(*, session: Session, now: datetime) -> list[Job]:
    """Pending jobs nobody has announced yet, each now marked as announced by this caller."""
    stmt = (
        select(Job.id)
        .where(Job.state == JobState.pending_approval, col(Job.notified_at).is_(None))
        .order_by(col(Job.id))
        .limit(_SCAN_BATCH)
    )
    return _claim(session, list(session.exec(stmt).all()), column="notified_at", now=now)


def claim_reminders(*, session: Session, now: datetime) -> list[Job]:
    """Announced pending jobs with a fifth (or less) of their window left and no reminder
    yet, each now marked as reminded by this caller."""
    stmt = (
        select(Job)
        .where(
            Job.state == JobState.pending_approval,
            col(Job.notified_at).is_not(None),
            col(Job.reminded_at).is_(None),
            col(Job.expires_at) > now,
        )
        .order_by(col(Job.expires_at))
        .limit(_SCAN_BATCH)
    )
    due = [
        job.id
        for job in session.exec(stmt).all()
        if job.expires_at is not None
        and job.expires_at - now <= (job.expires_at - job.created_at) * REMIND_WHEN_LEFT
    ]
    return _claim(session, due, column="reminded_at", now=now)


def next_notice_due(*, session: Session, now: datetime) -> datetime | None:
    """When a notice is next due: `now` while a pending job is unannounced, else when the
    first announced one reaches its reminder; None when no notice will be due."""
    unannounced = select(Job.id).where(
        Job.state == JobState.pending_approval, col(Job.notified_at).is_(None)
    )
    if session.exec(unannounced.limit(1)).first() is not None:
        return now
    stmt = select(Job.created_at, Job.expires_at).where(
        Job.state == JobState.pending_approval,
        col(Job.notified_at).is_not(None),
        col(Job.reminded_at).is_(None),
        col(Job.expires_at) > now,
    )
    return min(
        (
            expires - (expires - created) * REMIND_WHEN_LEFT
            for created, expires in session.exec(stmt).all()
            if expires is not None
        ),
        default=None,
    )


def _claim(session: Session, ids: list[int | None], *, column: str, now: datetime) -> list[Job]:
    claimed: list[Job] = []
    for job_id in ids:
        stmt = (
            update(Job)
            .where(
                col(Job.id) == job_id,
                col(Job.state) == JobState.pending_approval,
                getattr(Job, column).is_(None),
            )
            .values({column: now})
        )
        if session.exec(stmt).rowcount == 1:
            job = session.get(Job, job_id)
            if job is not None:
                claimed.append(job)
    return claimed
