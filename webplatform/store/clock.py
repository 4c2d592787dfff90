"""The time hosts share: the database server's clock on PostgreSQL, this host's on SQLite.

Hosts over one PostgreSQL decide with time together: a job's approval window opens on one
host and closes on another's housekeeping, a lease is written by one worker and reaped by
another, a decision signed on the dashboard's host grows too old on a worker's. A host's own
clock can be off by an hour (a failed NTP sync, a resumed VM, a clock set by hand), so where
such a decision is taken, "now" is the database server's (`clock_timestamp()`), the one
clock every host reads alike. A SQLite file belongs to one host, whose clock it is.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import DateTime
from sqlmodel import Session, func, select

from webplatform.store.models import utcnow

_CLOCK = select(func.clock_timestamp(type_=DateTime(timezone=True)))


def shared_now(session: Session) -> datetime:
    """Now as every host sharing `session`'s database sees it (UTC, timezone-aware)."""
    if session.get_bind().dialect.name != "postgresql":
        return utcnow()
    now: datetime = session.connection().execute(_CLOCK).scalar_one()
    return now.astimezone(UTC)
