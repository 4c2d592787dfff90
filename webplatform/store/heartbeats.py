"""Heartbeats: each dashboard, worker and MCP bridge says "still here" every few seconds."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session, col, delete, select

from webplatform.store.models import Heartbeat, utcnow


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
    now = now or utcnow()
    row = session.get(Heartbeat, process_id)
    if row is None:
        row = Heartbeat(id=process_id, role=role, host=host, pid=pid, seen_at=now)
    else:
        row.seen_at = now
    session.add(row)
    session.flush()


def fresh_heartbeat(
    *, session: Session, role: str, within_s: float, now: datetime | None = None
) -> bool:
    """True when some process of `role` beat within the last `within_s` seconds."""
    since = (now or utcnow()) - timedelta(seconds=within_s)
    stmt = select(Heartbeat.id).where(Heartbeat.role == role, col(Heartbeat.seen_at) >= since)
    return session.exec(stmt.limit(1)).first() is not None


def forget_heartbeat(*, session: Session, process_id: str) -> None:
    """Remove a process's heartbeat when it stops cleanly."""
    session.exec(delete(Heartbeat).where(col(Heartbeat.id) == process_id))


def prune_heartbeats(*, session: Session, older_than: datetime) -> int:
    """Delete heartbeats not seen since `older_than`; returns how many."""
    stmt = delete(Heartbeat).where(col(Heartbeat.seen_at) < older_than)
    return int(session.exec(stmt).rowcount)
