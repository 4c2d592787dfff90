"""The audit trail: every decision, state move, login and operator change, append-only.

Each event is a link of a hash chain (`webplatform.store.audit_chain`), so an edit, a
deletion or an insertion shows in `aat audit verify`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import insert
from sqlmodel import Session, col, select

from webplatform.store.audit_chain import AuditEntry, chain_tip, content_hash, lock_chain
from webplatform.store.models import AuditEvent, utcnow
from webplatform.telemetry import current_ids

__all__ = [
    "DECISION_EVENTS",
    "AuditEntry",
    "audit_events",
    "recent_events",
    "record_event",
    "trace_of",
]

# Decisions are kept forever (retention never prunes them): who approved what, and when.
DECISION_EVENTS: frozenset[str] = frozenset({"approved", "denied", "expired", "cancelled"})
_INSERT = insert(AuditEvent)


def record_event(session: Session, entry: AuditEntry) -> None:
    """Append one audit event in the caller's transaction (commits or rolls back with it),
    linked to the event before it; the chain stays locked until that transaction ends.

    `entry.event` is a short verb: "created", "approved", "denied", "expired", "claimed",
    "finished", "lost", "cancelled", "login", "logout", "operator-added", ...
    """
    at = utcnow()
    if entry.trace_id is None and (ids := current_ids()) is not None:
        entry = replace(entry, trace_id=ids[0], span_id=ids[1])
    lock_chain(session)
    prev = chain_tip(session)
    content: dict[str, Any] = {**vars(entry), "at": at, "prev_hash": prev}
    content["event_hash"] = content_hash(prev, entry, at)
    # A Core INSERT built once, its values bound at execution: none of the unit of work's
    # bookkeeping, and no statement to build and coerce per event.
    session.connection().execute(_INSERT, content)


def audit_events(*, session: Session, job_id: int) -> list[AuditEvent]:
    """A job's events, oldest first."""
    stmt = select(AuditEvent).where(AuditEvent.job_id == job_id).order_by(col(AuditEvent.id))
    return list(session.exec(stmt).all())


def recent_events(*, session: Session, limit: int = 100) -> list[AuditEvent]:
    """The latest events of any kind, newest first."""
    stmt = select(AuditEvent).order_by(col(AuditEvent.id).desc()).limit(limit)
    return list(session.exec(stmt).all())


def trace_of(*, session: Session, job_id: int) -> tuple[str, str] | None:
    """The (trace id, span id) of the first of a job's events recorded inside a span: the
    call that asked for it, whose trace the job's run continues."""
    stmt = (
        select(AuditEvent.trace_id, AuditEvent.span_id)
        .where(AuditEvent.job_id == job_id, col(AuditEvent.trace_id).is_not(None))
        .order_by(col(AuditEvent.id))
        .limit(1)
    )
    row = session.exec(stmt).first()
    if row is None or row[0] is None or row[1] is None:
        return None
    return row[0], row[1]
