"""Storage: the tables, the engine and sessions, migrations, operators and their passwords.

This package (with the data functions in `webplatform.jobs.states`) is the only place SQL is issued.
"""

from webplatform.store.engine import make_engine, migrate, session_scope, transact
from webplatform.store.models import (
    JOB_SUMMARY_COLUMNS,
    TERMINAL_STATES,
    UNFINISHED_STATES,
    AuditEvent,
    Heartbeat,
    Job,
    JobState,
    Meta,
    Operator,
    OperatorPublic,
    OperatorSession,
    Surface,
    utcnow,
)

__all__ = [
    "TERMINAL_STATES",
    "UNFINISHED_STATES",
    "AuditEvent",
    "Heartbeat",
    "Job",
    "JobState",
    "JOB_SUMMARY_COLUMNS",
    "Meta",
    "Operator",
    "OperatorPublic",
    "OperatorSession",
    "Surface",
    "make_engine",
    "migrate",
    "session_scope",
    "transact",
    "utcnow",
]
