"""Heartbeats: each dashboard, worker and MCP bridge says "still here" every few seconds."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Table, bindparam, update
from sqlmodel import Session, col, delete, select

from webplatform.store.clock import shared_now
from webplatform.store.models import Heartbeat

_TABLE: Table = Heartbeat.__table__  # type: ignore[attr-defined]
# Built once: a beat is the one write an idle process makes, so it skips the ORM.
_RENEW = (
    update(_TABLE)
    .where(_TABLE.c.id.in_(bindparam("ids", expanding=True)))
    .values(seen_at=bindparam("now"))
)


def beat(
    *,
    session: Session,
    process_id: str,
    role: str,
    host: str,
    pid: int,
    now: datetime | None = None,
) -> None:
    """Record that process `process_id` (a "dashboard", "worker" or "mcp") is alive now."""
    now = now or shared_now(session)
    row = session.get(Heartbeat, process_id)
    if row is None:
        row = Heartbeat(id=process_id, role=role, host=host, pid=pid, seen_at=now)
    else:
        row.seen_at = now
    session.add(row)
    session.flush()


def beat_all(
    *,
    session: Session,
    beats: Sequence[tuple[str, str]],
    host: str,
    pid: int,
    now: datetime | None = None,
) -> None:
    """`beat` for each (process id, role) of `beats`: one UPDATE once their rows exist."""
    now = now or shared_now(session)
    ids = [process_id for process_id, _role in beats]
    renewed = session.connection().execute(_RENEW, {"ids": ids, "now": now}).rowcount
    if renewed == len(ids):
        return
    for process_id, role in beats:  # first beats, or rows pruned meanwhile
        beat(session=session, process_id=process_id, role=role, host=host, pid=pid, now=now)


def fresh_heartbeat(
    *, session: Session, role: str, within_s: float, now: datetime | None = None
) -> bool:
    """True when some process of `role` beat within the last `within_s` seconds."""
    since = (now or shared_now(session)) - timedelta(seconds=within_s)
    stmt = select(Heartbeat.id).where(Heartbeat.role == role, col(Heartbeat.seen_at) >= since)
    return session.exec(stmt.limit(1)).first() is not None


def forget_heartbeat(*, session: Session, process_id: str) -> None:
    """Remove a process's heartbeat when it stops cleanly."""
    session.exec(delete(Heartbeat).where(col(Heartbeat.id) == process_id))


def prune_heartbeats(*, session: Session, older_than: datetime) -> int:
    """Delete heartbeats not seen since `older_than`; returns how many."""
    stmt = delete(Heartbeat).where(col(Heartbeat.seen_at) < older_than)
    return int(session.exec(stmt).rowcount)
