"""Job reads for pages and answers, and retention: no state moves here (see `jobs.states`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, text
from sqlalchemy.orm import defer, load_only
from sqlmodel import Session, col, delete, func, select

from webplatform.canonical import canonical_json
from webplatform.store import previews
from webplatform.store.audit import DECISION_EVENTS, AuditEntry, record_event
from webplatform.store.audit_chain import PRUNED_EVENT, bridges_over, lock_chain
from webplatform.store.models import (
    JOB_SUMMARY_COLUMNS,
    TERMINAL_STATES,
    TOKEN_PROOF,
    AuditEvent,
    Job,
    JobState,
    Surface,
)


def get_job(*, session: Session, job_id: int) -> Job | None:
    """The whole job row, or None."""
    return session.get(Job, job_id, populate_existing=True)


def edited_into(*, session: Session, job_id: int) -> Job | None:
    """The job an operator edited job `job_id` into (edit then approve), or None."""
    stmt = select(Job).where(col(Job.edited_from) == job_id).order_by(col(Job.id)).limit(1)
    return session.exec(stmt).first()


def current_job(*, session: Session, job_id: int) -> Job | None:
    """The job that now stands for `job_id`: itself, or, when an operator edited it before
    approving, the job it was edited into (followed to the last edit)."""
    job = get_job(session=session, job_id=job_id)
    # Only a denied job can have been edited; the lookup stays off the polling fast path.
    while job is not None and job.state == JobState.denied.value and job.id is not None:
        edited = edited_into(session=session, job_id=job.id)
        if edited is None:
            break
        job = edited
    return job


@dataclass(frozen=True)
class HistoryFilter:
    """Which jobs a history page shows (every one by default): in this state, of this tool,
    from this surface, created from `since` (inclusive) until `until` (exclusive)."""

    state: JobState | None = None
    name: str | None = None
    surface: Surface | None = None
    since: datetime | None = None
    until: datetime | None = None

    def where(self) -> list[ColumnElement[bool]]:
        """The filter as SQL conditions on the job table."""
        conditions: list[ColumnElement[bool]] = []
        if self.state is not None:
            conditions.append(col(Job.state) == self.state)
        if self.name is not None:
            conditions.append(col(Job.name) == self.name)
        if self.surface is not None:
            conditions.append(col(Job.surface) == self.surface)
        if self.since is not None:
            conditions.append(col(Job.created_at) >= self.since)
        if self.until is not None:
            conditions.append(col(Job.created_at) < self.until)
        return conditions


def list_jobs(
    *,
    session: Session,
    which: HistoryFilter = HistoryFilter(),  # noqa: B008 (frozen: one shared value is safe)
    before_id: int | None = None,
    limit: int = 50,
) -> list[Job]:
    """A page of history, newest first, without arguments, results or output (only the
    `JOB_SUMMARY_COLUMNS` are loaded).

    Keyset paging: pass the last id of a page as `before_id` for the next one, which
    costs the same on page 1 and page 2000.
    """
    columns = [getattr(Job, name) for name in JOB_SUMMARY_COLUMNS]
    stmt = select(Job).options(load_only(*columns)).where(*which.where())
    if before_id is not None:
        stmt = stmt.where(col(Job.id) < before_id)
    stmt = stmt.order_by(col(Job.id).desc()).limit(max(1, min(limit, 500)))
    return list(session.exec(stmt).all())


def count_pending(*, session: Session) -> int:
    """How many jobs wait for an operator."""
    stmt = select(func.count()).select_from(Job).where(Job.state == JobState.pending_approval)
    return int(session.exec(stmt).one())


def count_pending_from(*, session: Session, surface: Surface, requested_by: str | None) -> int:
    """How many jobs from one requester (surface and name) wait for an operator.

    On PostgreSQL this first takes a transaction lock on the requester, so two of their
    calls counting at once cannot both slip under a limit; SQLite's write lock (held by a
    write session) already serialises them.
    """
    if session.get_bind().dialect.name == "postgresql":
        key = f"aat-pending:{surface.value}:{requested_by}"
        session.exec(text("SELECT pg_advisory_xact_lock(hashtext(:key))").bindparams(key=key))  # type: ignore[call-overload]
    who = (
        col(Job.requested_by).is_(None)
        if requested_by is None
        else col(Job.requested_by) == requested_by
    )
    stmt = (
        select(func.count())
        .select_from(Job)
        .where(Job.state == JobState.pending_approval, Job.surface == surface, who)
    )
    return int(session.exec(stmt).one())


def pending_page(
    *, session: Session, offset: int, limit: int, newest_first: bool, head_chars: int
) -> list[tuple[Job, str, int]]:
    """One page of the approval queue: each job with the first `head_chars` characters of
    its arguments' JSON and that JSON's full length; the whole arguments are never loaded."""
    order = (
        (col(Job.created_at).desc(), col(Job.id).desc())
        if newest_first
        else (col(Job.created_at), col(Job.id))
    )
    stmt = (
        select(Job, func.substr(Job.args_json, 1, head_chars), func.length(Job.args_json))
        .options(defer(Job.args_json))  # type: ignore[arg-type]
        .where(Job.state == JobState.pending_approval)
        .order_by(*order)
        .offset(max(0, offset))
        .limit(max(1, limit))
    )
    return [(job, str(head), int(size)) for job, head, size in session.exec(stmt).all()]


def _is(column: Any, value: str | None) -> Any:
    return col(column).is_(None) if value is None else col(column) == value


def requester_filter(*, surface: Surface, client: str | None, agent: str | None) -> list[Any]:
    """The conditions that pick one requester's jobs on `surface`: those of agent token
    `agent`, or else those this exact client name (None being a name too) asked for without
    a token. The approvals resource, `job_status` and the recent-jobs list all use it."""
    who = (
        [col(Job.requested_by) == agent, col(Job.requester_proof) == TOKEN_PROOF]
        if agent is not None
        else [
            _is(Job.client, client),
            _is(Job.requested_by, client),
            col(Job.requester_proof).is_(None),
        ]
    )
    return [Job.surface == surface, *who]


def job_of_requester(job: Job, *, surface: Surface, client: str | None, agent: str | None) -> bool:
    """True when `job` is one the requester of `requester_filter` asked for: a token's jobs
    answer only that token; a client without one, only its own tokenless jobs (a client that
    names itself after a token agent gets nothing of that agent's)."""
    if Surface(job.surface) is not surface:
        return False
    if agent is not None:
        return job.requested_by == agent and job.requester_proof == TOKEN_PROOF
    return job.client == client and job.requested_by == client and job.requester_proof is None


def pending_from_client(
    *,
    session: Session,
    surface: Surface,
    client: str | None,
    agent: str | None = None,
    limit: int = 500,
) -> list[Job]:
    """The jobs one requester has waiting for an operator on `surface`, oldest first
    (`requester_filter`)."""
    stmt = (
        select(Job)
        .where(
            Job.state == JobState.pending_approval,
            *requester_filter(surface=surface, client=client, agent=agent),
        )
        .order_by(col(Job.created_at), col(Job.id))
        .limit(limit)
    )
    return list(session.exec(stmt).all())


def recent_from_requester(
    *, session: Session, surface: Surface, client: str | None, agent: str | None, limit: int
) -> list[Job]:
    """One requester's newest jobs on `surface`, newest first (`requester_filter`)."""
    stmt = (
        select(Job)
        .where(*requester_filter(surface=surface, client=client, agent=agent))
        .order_by(col(Job.id).desc())
        .limit(limit)
    )
    return list(session.exec(stmt).all())


def newest_pending_id(*, session: Session) -> int:
    """The highest id of a job waiting for an operator (0 when none waits)."""
    stmt = select(func.max(Job.id)).where(Job.state == JobState.pending_approval)
    return int(session.exec(stmt).one() or 0)


def pending_approvals(*, session: Session, limit: int = 200) -> list[Job]:
    """The approval queue, oldest first, with full arguments for the operator to review."""
    stmt = (
        select(Job)
        .where(Job.state == JobState.pending_approval)
        .order_by(col(Job.created_at), col(Job.id))
        .limit(limit)
    )
    return list(session.exec(stmt).all())


def prune_finished(
    *, session: Session, older_than: datetime, batch: int = 500, max_batches: int | None = None
) -> int:
    """Delete finished jobs last changed before `older_than`, in batches; how many.

    Never touches pending, approved or running jobs, and keeps decision audit events
    (approved, denied, expired, cancelled), which name the call themselves. `max_batches`
    stops early so a caller can commit between batches and keep each transaction short.
    Each batch that removes audit events appends a `pruned` event bridging the gaps, so the
    audit chain still verifies.
    """
    lock_chain(session)
    deleted = 0
    rounds = itertools.count() if max_batches is None else range(max_batches)
    for _ in rounds:
        stmt = (
            select(Job.id)
            .where(col(Job.state).in_(list(TERMINAL_STATES)), col(Job.updated_at) < older_than)
            .order_by(col(Job.id))
            .limit(batch)
        )
        ids = list(session.exec(stmt).all())
        if not ids:
            return deleted
        doomed = col(AuditEvent.job_id).in_(ids), col(AuditEvent.event).not_in(DECISION_EVENTS)
        links = session.exec(
            select(AuditEvent.prev_hash, AuditEvent.event_hash)
            .where(*doomed)
            .order_by(col(AuditEvent.id))
        ).all()
        session.exec(delete(AuditEvent).where(*doomed))
        session.exec(delete(Job).where(col(Job.id).in_(ids)))
        previews.forget(session=session, job_ids=[i for i in ids if i is not None])
        if links:
            summary = {
                "jobs": len(ids),
                "events": len(links),
                "bridges": bridges_over([(p, h) for p, h in links]),
            }
            record_event(
                session,
                AuditEntry(actor="retention", event=PRUNED_EVENT, detail=canonical_json(summary)),
            )
        deleted += len(ids)
    return deleted
