"""Jobs whose state disagrees with their own audit events: rows changed outside aat.

aat changes a job's state only by a compare-and-set that writes an audit event in the same
transaction (or by creating the job, which writes one too), so a job's events, read in order,
move it from state to state and end in the state its row holds. A row moved by SQL breaks
that: a finished job put back to `approved` still has events saying it finished, and a state
no event names was never reached through aat. `aat audit verify` reports each such job.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from sqlalchemy import String, and_, select, type_coerce
from sqlmodel import Session, col

from webplatform.store.models import AuditEvent, Job

_BATCH = 1000
# Each job with every event that names a state, in order; jobs without any come with NULLs.
# One statement, so it reads one consistent snapshot even while jobs move.
_TRAIL = (
    select(
        col(Job.id),
        # As stored: a state no aat process would write is reported, not an error here.
        type_coerce(col(Job.state), String(32)),
        col(AuditEvent.id),
        col(AuditEvent.event),
        col(AuditEvent.from_state),
        col(AuditEvent.to_state),
    )
    .select_from(Job)
    .outerjoin(
        AuditEvent,
        and_(col(AuditEvent.job_id) == col(Job.id), col(AuditEvent.to_state).is_not(None)),
    )
    .order_by(col(Job.id), col(AuditEvent.id))
)


def jobs_out_of_step(*, session: Session) -> Iterator[str]:
    """One line per job whose state its audit events do not account for, naming the job, the
    event and the states that disagree; nothing when every job agrees."""
    rows = session.connection().execution_options(yield_per=_BATCH).execute(_TRAIL)
    for job_id, trail in itertools.groupby(rows, key=lambda row: row[0]):
        problem = _disagreement(job_id, list(trail))
        if problem is not None:
            yield problem


def _disagreement(job_id: int, trail: list[Any]) -> str | None:
    """Why this job's row and its events disagree, or None when they agree."""
    current = trail[0][1]
    last = None
    for row in trail:
        event_id, event, from_state, to_state = row[2:]
        if event_id is None:
            break  # the outer join's row for a job with no state events
        if last is not None and from_state is not None and from_state != last[2]:
            return (
                f"job {job_id}: event {event_id} ({event}) moved it from {from_state}, but "
                f"event {last[0]} ({last[1]}) had left it {last[2]}: the row was changed "
                "outside aat in between"
            )
        last = (event_id, event, to_state)
    if last is None:
        return (
            f"job {job_id}: state {current}, but no audit event records a state for it: the "
            "row was written outside aat"
        )
    if last[2] != current:
        return (
            f"job {job_id}: state {current}, but its last audit event {last[0]} ({last[1]}) "
            f"left it {last[2]}: the row was changed outside aat"
        )
    return None
