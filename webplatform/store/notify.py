"""Wake-ups on job moves: PostgreSQL LISTEN/NOTIFY, SQLite's own files, polling as the fallback.

Every state move sends a notification on its schema's channel in its own transaction (so it
is delivered only if the move commits). An idle worker on PostgreSQL waits on that channel
instead of polling fast, so an approval starts running at once however many hosts poll less
often. SQLite has no such channel: there a committed move wakes waiters in the same process
(the Approve POST and the embedded worker of `aat serve`), and a commit by any process
changes the database's write-ahead log, which one thread per process and database file
watches (inotify) and turns into the same wake-up. Where neither exists, waiters poll.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import TYPE_CHECKING

from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session

from webplatform import inotify
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


def _ring() -> None:
    """Count a move some process committed (seen in the database's files) and wake waiters."""
    global _local_count
    with _local_moves:
        _local_count += 1
        _local_moves.notify_all()


class StopEvent(threading.Event):
    """A stop flag whose `set` also wakes every waiter, so a sleeping worker stops at once."""

    def set(self) -> None:
        super().set()
        with _local_moves:
            _local_moves.notify_all()


_doorbells: dict[str, threading.Thread] = {}
_doorbells_lock = threading.Lock()
# Files whose watch the kernel refused (said once in the log).
_unwatched: set[str] = set()
# What a commit changes: the write-ahead log (WAL mode), or the file itself (other modes).
_DB_MASK = inotify.MODIFY | inotify.CLOSE_WRITE | inotify.CREATE | inotify.MOVED_TO


def watch_database(engine: Engine) -> bool:
    """Ring this process's waiters whenever the SQLite file of `engine` (or its WAL) changes,
    whoever wrote it; True while that watch runs (one thread per process and file)."""
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        return False
    path = os.path.realpath(database)
    with _doorbells_lock:
        thread = _doorbells.get(path)
        if thread is not None and thread.is_alive():
            return True
        if not inotify.supported():
            return False
        watch = None
        try:
            watch = inotify.Inotify()
            watch.add(os.path.dirname(path), _DB_MASK | inotify.ONLYDIR)
        except OSError as exc:
            if watch is not None:
                watch.close()
                watch.read(0)  # releases its descriptors
            # Asked again on every idle look of a worker: said once, tried again silently
            # (an inotify limit reached now may be free later).
            if path not in _unwatched:
                _unwatched.add(path)
                log.warning("cannot watch %s for commits (%s); polling instead", path, exc)
            return False
        thread = threading.Thread(
            target=_doorbell, args=(watch, path), name="aat-db-watch", daemon=True
        )
        _doorbells[path] = thread
        thread.start()
        return True


def _doorbell(watch: inotify.Inotify, path: str) -> None:
    names = {os.path.basename(path), os.path.basename(path) + "-wal"}
    while not watch.closed:
        events = watch.read()  # sleeps until the folder changes
        if any(event.name in names for event in events):
            _ring()
        if any(event.mask & inotify.SELF_GONE for event in events):
            break  # the folder went away: waiters poll from now on
    watch.close()
    watch.read(0)


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
    """Waits until some job moves (PostgreSQL's NOTIFY, a commit to the SQLite file, a move
    in this process), or simply for the timeout where there is no such signal."""

    def __init__(self, engine: Engine) -> None:
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._engine = engine
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
        """True while every job move, in any process, wakes `wait` up early."""
        return self._conn is not None or watch_database(self._engine)

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
