"""When the database next needs a housekeeper: the earliest approval expiry and lease end.

One read of two indexed minimums, so a housekeeper can sleep until the first of them instead
of scanning on a fixed beat.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, func, select

from webplatform.store.models import Job, JobState


@dataclass(frozen=True)
class Deadlines:
    """The earliest moment a pending approval expires and a running job's lease ends (UTC);
    None when there is no such job."""

    expiry: datetime | None
    lease_end: datetime | None


_PENDING = JobState.pending_approval
# Built once (a housekeeper reads it on every pass) and run as a Core statement.
_NEXT = select(
    select(func.min(Job.expires_at)).where(Job.state == _PENDING).scalar_subquery(),
    select(func.min(Job.lease_expires_at)).where(Job.state == JobState.running).scalar_subquery(),
)


def next_deadlines(*, session: Session) -> Deadlines:
    """The earliest `expires_at` of a pending job and `lease_expires_at` of a running one."""
    expiry, lease_end = session.connection().execute(_NEXT).one()
    return Deadlines(expiry=expiry, lease_end=lease_end)
