"""A new job's row as SQL: inserted as one Core statement, then signed once its id is known
(`webplatform.jobs.calls.create_job` decides what the row holds)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert
from sqlmodel import Session, col, update

from webplatform.store.models import Job

_INSERT_JOB = insert(Job)


def insert_job(session: Session, values: dict[str, Any]) -> int:
    """Insert one job row holding `values`; its id.

    A Core INSERT: the unit of work's bookkeeping cost more than the statement (one call of
    an agent's loop writes this row before its tool starts).
    """
    inserted = session.connection().execute(_INSERT_JOB, values).inserted_primary_key
    assert inserted is not None  # an INSERT of one row
    return int(inserted[0])


def sign_new_job(session: Session, job_id: int, signed: dict[str, str]) -> None:
    """Set the signatures (`signed`, column to value) on the job just inserted."""
    session.connection().execute(update(Job).where(col(Job.id) == job_id), signed)
