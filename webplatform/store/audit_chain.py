"""The audit trail's hash chain: each event's hash covers its content and the previous hash.

Appends are serialised (SQLite has one writer at a time; PostgreSQL takes a transaction-scoped
advisory lock), so the chain never forks. Any transaction that moves a job takes that lock
before it locks the job's row, so lock order is always chain, then row: no deadlocks.

Retention removes old events from the middle of the chain. It does so in the open: the same
transaction appends a `pruned` event listing, for each run of removed events, the hash the
run started from and the hash it ended with (a bridge). Verification crosses a gap only over
such a bridge, and the `pruned` event is itself in the chain, so a bridge cannot be added or
changed unnoticed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, col, select

from webplatform.canonical import canonical_json, sha256_hex
from webplatform.store.models import AuditEvent

GENESIS = "0" * 64
PRUNED_EVENT = "pruned"
# Any fixed 64-bit number works; it only has to be the same in every aat process.
PG_CHAIN_LOCK = 0x0AA7_0002
_PAGE = 1000
# Built once: appending an event reads the tip on every job move.
_TIP = select(AuditEvent.event_hash).order_by(col(AuditEvent.id).desc()).limit(1)


def lock_chain(session: Session) -> None:
    """Hold the chain's append lock until this transaction ends (PostgreSQL; SQLite's write
    transactions are serialised already). Take it before locking any job row."""
    if session.get_bind().dialect.name == "postgresql":
        session.connection().execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_CHAIN_LOCK})


def chain_tip(session: Session) -> str:
    """The hash the next event links to: the newest event's, or GENESIS for an empty trail."""
    tip: str | None = session.connection().execute(_TIP).scalar()
    return tip or GENESIS


@dataclass(frozen=True)
class AuditEntry:
    """What one audit event says: who (`actor`) did what (`event`, a short verb), to which job
    and from which state to which, with what detail, from which address."""

    actor: str
    event: str
    job_id: int | None = None
    from_state: str | None = None
    to_state: str | None = None
    detail: str | None = None
    address: str | None = None
    # The span active when it was recorded (`webplatform.telemetry.current_ids`), if any.
    trace_id: str | None = None
    span_id: str | None = None

    @classmethod
    def of(cls, row: Any) -> AuditEntry:
        """The entry an event row (or a mapping with the same keys) records."""
        # A row of an older table (a migration re-hashing) lacks the later fields: None.
        get: Callable[[str], Any] = (
            row.get if isinstance(row, Mapping) else lambda name: getattr(row, name, None)
        )
        return cls(**{name: get(name) for name in _ENTRY_FIELDS})


_ENTRY_FIELDS = tuple(field.name for field in fields(AuditEntry))


def content_hash(prev_hash: str, entry: AuditEntry, at: datetime) -> str:
    """sha256 over canonical JSON of an event's content (`entry`, made at `at`) and the hash
    before it."""
    body: dict[str, Any] = {
        "prev": prev_hash,
        "job": entry.job_id,
        "at": at.astimezone(UTC).isoformat(timespec="microseconds"),
        "actor": entry.actor,
        "event": entry.event,
        "from": entry.from_state,
        "to": entry.to_state,
        "detail": entry.detail,
        "address": entry.address,
    }
    if entry.trace_id is not None:  # only then: events without one keep the hash they had
        body["trace"] = [entry.trace_id, entry.span_id]
    return sha256_hex(canonical_json(body))


def hash_of(row: AuditEvent, prev_hash: str) -> str:
    """The hash `row` must carry when it follows `prev_hash`."""
    return content_hash(prev_hash, AuditEntry.of(row), row.at)


def bridges_over(removed: list[tuple[str | None, str | None]]) -> list[list[str]]:
    """The bridges across removed events given as (prev_hash, event_hash) in chain order:
    one [from, to] per run of consecutive removed events."""
    step = {prev: own for prev, own in removed if prev and own}
    targets = set(step.values())
    bridges = []
    for start in step:
        if start in targets:
            continue  # inside a run; its run's start is listed separately
        end = step[start]
        while end in step:
            end = step[end]
        bridges.append([start, end])
    return bridges


@dataclass(frozen=True)
class ChainReport:
    """What verification found: how many events were checked, and the first break if any."""

    checked: int
    broken_at: int | None = None
    problem: str | None = None

    @property
    def intact(self) -> bool:
        """True when every event links to the one before it and matches its hash."""
        return self.broken_at is None


def verify_chain(*, session: Session) -> ChainReport:
    """Walk every event oldest first; stop at the first that was edited, or that does not
    follow the event before it (one was deleted, inserted or moved)."""
    bridges = _bridges(session)
    prev, prev_id, checked = GENESIS, None, 0
    for row in _events(session):
        after = f"event {prev_id}" if prev_id is not None else "the start of the trail"
        if not _links(prev, row.prev_hash, bridges):
            return ChainReport(
                checked,
                row.id,
                f"audit event {row.id} ({row.event}) does not follow {after}: an event was "
                "deleted, inserted or moved there",
            )
        if row.event_hash != hash_of(row, row.prev_hash or ""):
            return ChainReport(
                checked,
                row.id,
                f"audit event {row.id} ({row.event}) was edited: its content does not match "
                "its hash",
            )
        prev, prev_id, checked = row.event_hash, row.id, checked + 1
    return ChainReport(checked)


def export_rows(*, session: Session, since: datetime | None = None) -> Iterator[dict[str, Any]]:
    """Every event (from `since` on) oldest first, as JSON-ready dicts with their hashes."""
    for row in _events(session, since=since):
        yield exported(row)


def rows_after(
    *, session: Session, after_id: int, since: datetime | None = None
) -> list[dict[str, Any]]:
    """The events after event `after_id` (and from `since` on), oldest first, at most a page,
    as `export_rows` gives them. Appends are serialised (the chain's lock), so ids grow in
    the order events were committed: reading on from the last id seen misses none."""
    stmt = select(AuditEvent).where(col(AuditEvent.id) > after_id)
    if since is not None:
        stmt = stmt.where(col(AuditEvent.at) >= since)
    return [exported(row) for row in session.exec(stmt.order_by(col(AuditEvent.id)).limit(_PAGE))]


def id_before_last(*, session: Session, count: int) -> int:
    """The id after which the last `count` events start (0 when there are no more)."""
    stmt = select(AuditEvent.id).order_by(col(AuditEvent.id).desc()).offset(count).limit(1)
    found = session.exec(stmt).first()
    return int(found) if found is not None else 0


def exported(row: AuditEvent) -> dict[str, Any]:
    """One event as the export and `aat audit tail` print it: JSON-ready, with its hashes and
    the trace it was recorded in."""
    return {
        "id": row.id,
        "at": row.at.astimezone(UTC).isoformat(timespec="microseconds"),
        "job_id": row.job_id,
        "actor": row.actor,
        "event": row.event,
        "from_state": row.from_state,
        "to_state": row.to_state,
        "detail": row.detail,
        "address": row.address,
        "prev_hash": row.prev_hash,
        "hash": row.event_hash,
        "trace_id": row.trace_id,
        "span_id": row.span_id,
    }


def _links(prev: str, claimed: str | None, bridges: dict[str, str]) -> bool:
    """True if `claimed` is `prev`, or is reached from it over retention's bridges."""
    current: str | None = prev
    for _ in range(len(bridges) + 1):
        if current == claimed:
            return True
        current = bridges.get(current or "")
        if current is None:
            return False
    return False


def _bridges(session: Session) -> dict[str, str]:
    stmt = select(AuditEvent.detail).where(AuditEvent.event == PRUNED_EVENT)
    bridges: dict[str, str] = {}
    for detail in session.exec(stmt):
        try:
            pairs = json.loads(detail or "{}").get("bridges", [])
        except (ValueError, AttributeError):
            continue  # an edited `pruned` event: its own hash check reports it
        for pair in pairs:
            if isinstance(pair, list) and len(pair) == 2:
                bridges[str(pair[0])] = str(pair[1])
    return bridges


def _events(session: Session, *, since: datetime | None = None) -> Iterator[AuditEvent]:
    """All events in id order, a page at a time so a long trail never sits in memory."""
    last = None
    while True:
        stmt = select(AuditEvent).order_by(col(AuditEvent.id)).limit(_PAGE)
        if last is not None:
            stmt = stmt.where(col(AuditEvent.id) > last)
        if since is not None:
            stmt = stmt.where(col(AuditEvent.at) >= since)
        page = list(session.exec(stmt))
        yield from page
        if len(page) < _PAGE:
            return
        last = page[-1].id
