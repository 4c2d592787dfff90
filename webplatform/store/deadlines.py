"""When the database next needs a housekeeper: the earliest approval expiry and lease end.

One read of two indexed minimums, so a housekeeper can sleep until the first of them instead
of scanning on a fixed beat; on PostgreSQL the same read tells the database server's time,
which the deadlines are compared with (`webplatform.store.clock`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import DateTime
from sqlmodel import Session, func, select

from webplatform.store.models import Job, JobState, utcnow


@dataclass(frozen=True)
class Deadlines:
    """The earliest moment a pending approval expires and a running job's lease ends (UTC);
    None when there is no such job; and `now`, the clock hosts share, when they were read."""

    expiry: datetime | None
    lease_end: datetime | None
    now: datetime


_PENDING = JobState.pending_approval
# Built once (a housekeeper reads it on every pass) and run as a Core statement.
_NEXT = select(
    select(func.min(Job.expires_at)).where(Job.state == _PENDING).scalar_subquery(),
    select(func.min(Job.lease_expires_at)).where(Job.state == JobState.running).scalar_subquery(),
)
_NEXT_AND_NOW = _NEXT.add_columns(func.clock_timestamp(type_=DateTime(timezone=True)))


def next_deadlines(*, session: Session) -> Deadlines:
    """The earliest `expires_at` of a pending job and `lease_expires_at` of a running one, and
    the time they are compared with: the database server's on PostgreSQL, this host's on
    SQLite."""
    if session.get_bind().dialect.name != "postgresql":
        expiry, lease_end = session.connection().execute(_NEXT).one()
        return Deadlines(expiry=expiry, lease_end=lease_end, now=utcnow())
    expiry, lease_end, now = session.connection().execute(_NEXT_AND_NOW).one()
    return Deadlines(expiry=expiry, lease_end=lease_end, now=now.astimezone(UTC))
