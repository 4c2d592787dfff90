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
from dataclasses import dataclass
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


@dataclass
class Doorbell:
    """The watch of one database file, shared by this process's listeners of that file."""

    path: str
    watch: inotify.Inotify
    thread: threading.Thread
    users: int = 0


_doorbells: dict[str, Doorbell] = {}
_doorbells_lock = threading.Lock()
# Files whose watch the kernel refused (said once in the log).
_unwatched: set[str] = set()
# What a commit changes: the write-ahead log (WAL mode), or the file itself (other modes).
_DB_MASK = inotify.MODIFY | inotify.CLOSE_WRITE | inotify.CREATE | inotify.MOVED_TO


def watch_database(engine: Engine) -> Doorbell | None:
    """Ring this process's waiters whenever the SQLite file of `engine` (or its WAL) changes,
    whoever wrote it: the running watch (one thread per process and file, shared), to give
    back with `release_database`; None where there is none."""
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    path = os.path.realpath(database)
    with _doorbells_lock:
        bell = _doorbells.get(path)
        if bell is not None and bell.thread.is_alive():
            bell.users += 1
            return bell
        if not inotify.supported():
            return None
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
            return None
        thread = threading.Thread(
            target=_doorbell, args=(watch, path), name="aat-db-watch", daemon=True
        )
        bell = _doorbells[path] = Doorbell(path=path, watch=watch, thread=thread, users=1)
        thread.start()
        return bell


def release_database(bell: Doorbell) -> None:
    """One listener less of `bell`'s file; the last one ends its thread and inotify instance."""
    with _doorbells_lock:
        bell.users -= 1
        if bell.users > 0:
            return
        if _doorbells.get(bell.path) is bell:
            del _doorbells[bell.path]
    bell.watch.close()  # wakes the thread, which releases the instance
    bell.thread.join(timeout=5)


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
        self._bell: Doorbell | None = None
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
        if self._conn is not None:
            return True
        if self._bell is not None and not self._bell.thread.is_alive():
            release_database(self._bell)  # its folder went away
            self._bell = None
        if self._bell is None:
            self._bell = watch_database(self._engine)
        return self._bell is not None

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
        if self._bell is not None:
            bell, self._bell = self._bell, None
            release_database(bell)
        if self._conn is not None:
            import psycopg

            conn, self._conn = self._conn, None
            with contextlib.suppress(psycopg.Error):
                conn.close()
