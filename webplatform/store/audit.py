"""The audit trail: every decision, state move, login and operator change, append-only."""

from __future__ import annotations

from sqlmodel import Session, col, select

from webplatform.store.models import AuditEvent, utcnow

# Decisions are kept forever (retention never prunes them): who approved what, and when.
DECISION_EVENTS: frozenset[str] = frozenset({"approved", "denied", "expired", "cancelled"})


def record_event(
    *,
    session: Session,
    actor: str,
    event: str,
    job_id: int | None = None,
    from_state: str | None = None,
    to_state: str | None = None,
    detail: str | None = None,
    address: str | None = None,
) -> AuditEvent:
    """Append one audit event in the caller's transaction (commits or rolls back with it).

    `event` is a short verb: "created", "approved", "denied", "expired", "claimed",
    "finished", "lost", "cancelled", "login", "logout", "operator-added", ...
    """
    row = AuditEvent(
        job_id=job_id,
        at=utcnow(),
        actor=actor,
        event=event,
        from_state=from_state,
        to_state=to_state,
        detail=detail,
        address=address,
    )
    session.add(row)
    session.flush()
    return row


def audit_events(*, session: Session, job_id: int) -> list[AuditEvent]:
    """A job's events, oldest first."""
    stmt = select(AuditEvent).where(AuditEvent.job_id == job_id).order_by(col(AuditEvent.id))
    return list(session.exec(stmt).all())


def recent_events(*, session: Session, limit: int = 100) -> list[AuditEvent]:
    """The latest events of any kind, newest first."""
    stmt = select(AuditEvent).order_by(col(AuditEvent.id).desc()).limit(limit)
    return list(session.exec(stmt).all())
