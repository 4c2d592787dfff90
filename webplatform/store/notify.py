"""Wake-ups on job moves: PostgreSQL LISTEN/NOTIFY, with polling as the fallback everywhere.

Every state move sends a notification on its schema's channel in its own transaction (so it
is delivered only if the move commits). An idle worker on PostgreSQL waits on that channel
instead of polling fast, so an approval starts running at once however many hosts poll less
often. SQLite has no such channel; there a committed move wakes waiters in the same process
(the Approve POST and the embedded worker of `aat serve`), and other processes poll.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING

from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session

from webplatform.store.models import JobState

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

# One channel per schema: NOTIFY is database-wide, and deployments (or test runs) that share
# a database in separate schemas must not wake each other. Computed by the server, so the
# notifying and the listening side always agree and the name stays under 63 bytes.
CHANNEL_SQL = "'aat_jobs_' || left(md5(current_schema()), 16)"
_MOVED = "aat_job_moved"

# Committed job moves in this process, for waiters that have no LISTEN channel.
_local_moves = threading.Condition()
_local_count = 0


@event.listens_for(OrmSession, "after_commit")
def _announce_locally(session: OrmSession) -> None:
    global _local_count
    if session.info.pop(_MOVED, False):
        with _local_moves:
            _local_count += 1
            _local_moves.notify_all()


@event.listens_for(OrmSession, "after_rollback")
def _forget_rolled_back(session: OrmSession) -> None:
    session.info.pop(_MOVED, None)


def wait_local_move(timeout_s: float, stop: threading.Event | None = None) -> bool:
    """Block until a job move commits in this process or `timeout_s` passes; True if moved."""
    with _local_moves:
        seen = _local_count
        return (
            _local_moves.wait_for(
                lambda: _local_count != seen or (stop is not None and stop.is_set()),
                timeout=timeout_s,
            )
            and _local_count != seen
        )


def notify_job(session: Session, job_id: int, state: JobState) -> None:
    """Announce that job `job_id` is now in `state`, when the transaction commits."""
    session.info[_MOVED] = True
    if session.get_bind().dialect.name != "postgresql":
        return
    session.connection().execute(
        text(f"SELECT pg_notify({CHANNEL_SQL}, :payload)"),
        {"payload": f"{job_id}:{state.value}"},
    )


class JobNotifications:
    """Waits until some job moves (PostgreSQL), or simply for the timeout (anything else)."""

    def __init__(self, engine: Engine) -> None:
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        if engine.dialect.name == "postgresql":
            self._listen(engine)

    def _listen(self, engine: Engine) -> None:
        # Imported here: a SQLite-only process (`aat mcp`) never pays for the driver.
        import psycopg

        conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        try:
            conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
            row = conn.execute(f"SELECT {CHANNEL_SQL}").fetchone()
            conn.execute(f'LISTEN "{row[0] if row else "aat_jobs"}"')
        except psycopg.Error as exc:
            log.warning("cannot LISTEN for job moves (%s); polling instead", type(exc).__name__)
            return
        self._conn = conn

    @property
    def listening(self) -> bool:
        """True while job moves wake `wait` up early."""
        return self._conn is not None

    def wait(self, timeout_s: float, stop: threading.Event) -> bool:
        """Block until a job moves, `timeout_s` passes or `stop` is set; True if woken by a move."""
        if self._conn is None:
            return wait_local_move(timeout_s, stop)
        import psycopg

        try:
            for _ in self._conn.notifies(timeout=timeout_s, stop_after=1):
                # Several queued moves cost a waiter only as many quick looks for work.
                return True
        except psycopg.Error as exc:
            log.warning("lost the LISTEN connection (%s); polling instead", type(exc).__name__)
            self.close()
            stop.wait(min(timeout_s, 1.0))
        return False

    def close(self) -> None:
        """Stop listening."""
        if self._conn is not None:
            import psycopg

            conn, self._conn = self._conn, None
            with contextlib.suppress(psycopg.Error):
                conn.close()
