"""Storage: the tables, the engine and sessions, migrations, and every query.

This package is the only place SQL is built (a test in `tests/test_transactions.py` checks
it). Its queries are reached through one store object per aggregate, built by `Platform`
(`webplatform.store.door.Aggregate`: the platform's transaction door and its seal):
`platform.jobs`, `platform.leases` and `platform.heartbeats` (`jobs`), `platform.operators`
(`operators`), `platform.tokens` (`agents`), `platform.rules` (`rules`), `platform.sign_ins`
(`oauth`), `platform.passkeys`, `platform.sessions`, `platform.audit` (`trail`) and
`platform.adoption`. Each method is one transaction. A job's state moves where
`webplatform.jobs.states` decides it; that step runs through `platform.jobs.step(...)`, and
the SQL it issues (`transitions`, `leases`, `job_rows`) is here. What hosts decide with time
reads "now" from `clock` (the database server's on PostgreSQL).
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
