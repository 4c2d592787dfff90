"""Readiness for a load balancer: the database answers and its schema is the code's."""

from __future__ import annotations

from sqlalchemy import text
from sqlmodel import Session

from webplatform.store.engine import head_revision


def readiness_problem(session: Session) -> str | None:
    """What keeps this process from serving requests now, in one line, or None when ready.

    Issues one query: a database that does not answer raises (the caller says so).
    """
    versions = [
        row[0]
        for row in session.connection().execute(text("SELECT version_num FROM alembic_version"))
    ]
    head = head_revision()
    if head is None:
        return "the migration scripts have no single head"
    if versions != [head]:
        return f"the database schema is at {', '.join(versions) or 'nothing'}, not {head}"
    return None
