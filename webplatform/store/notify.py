"""Wake-ups on job moves: PostgreSQL LISTEN/NOTIFY, SQLite's own files, polling as the fallback.

Every state move sends a notification on its schema's channel in its own transaction (so it
is delivered only if the move commits). An idle worker on PostgreSQL waits on that channel
instead of polling fast, so an approval starts running at once however many hosts poll less
often. SQLite has no such channel: there a committed move wakes waiters in the same process
(the Approve POST and the embedded worker of `aat serve`), and then touches a marker file
beside the database (`aat.db-moved`), which one thread per process and database file
watches (inotify) and turns into the same wake-up for every process on the host. Only job
moves touch it: a heartbeat or a lease renewal wakes nobody. Where neither exists, waiters
poll.

A waiter may ask to be woken only by moves into `approved` (`only_approved`): the worker
embedded in `aat serve`, whose only work is approved jobs, is then not woken by every call the
server records and finishes. NOTIFY carries the state; on SQLite a move into `approved` also
touches a second marker (`aat.db-approved`), which is what such a waiter's doorbell rings for.

A waiter never misses a move committed between two of its waits: `JobNotifications` counts
from where its last wait ended, and PostgreSQL keeps notifications queued on the connection.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import select
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session

from webplatform import inotify
from webplatform.store.engine import pg_link_args
from webplatform.store.models import JobState

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

# One channel per schema: NOTIFY is database-wide, and deployments (or test runs) that share
# a database in separate schemas must not wake each other. Computed by the server, so the
# notifying and the listening side always agree and the name stays under 63 bytes.
CHANNEL_SQL = "'aat_jobs_' || left(md5(current_schema()), 16)"
_MOVED = "aat_job_moved"
# How often a waiter whose LISTEN connection broke tries to open another (polling meanwhile).
RELISTEN_S = 5.0

# What a SQLite database's marker files are called: the database file's name and these
# (every move; moves into `approved` as well).
MARKER_SUFFIX = "-moved"
APPROVED_SUFFIX = "-approved"
_STATES = "aat_job_states"

# Committed job moves in this process, for waiters that have no LISTEN channel: all of them,
# and those into `approved` (a ring from the marker files counts as what it says).
_local_moves = threading.Condition()
_local_count = 0
_approved_count = 0
# Called on each of those moves (under `_local_moves`), for waiters on an event loop.
_on_move: list[Callable[[], None]] = []


def on_move(callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback` after every job move this process commits or is rung for (a SQLite
    doorbell), from the thread that saw it; it must return at once (hand the news to an
    event loop, say). Returns the function that stops the calls."""
    with _local_moves:
        _on_move.append(callback)

    def stop() -> None:
        with _local_moves, contextlib.suppress(ValueError):
            _on_move.remove(callback)

    return stop


def _count_move(*, approved: bool) -> None:
    """One more move seen (`approved`: one into `approved` among them, or maybe): wake the
    threads waiting and tell the callbacks."""
    global _local_count, _approved_count
    with _local_moves:
        _local_count += 1
        _approved_count += approved
        _local_moves.notify_all()
        for callback in _on_move:
            callback()


@event.listens_for(OrmSession, "after_commit")
def _announce_locally(session: OrmSession) -> None:
    marker = session.info.pop(_MOVED, None)
    states = session.info.pop(_STATES, ())
    if marker is None:
        return
    approved = JobState.approved in states
    _count_move(approved=approved)
    if marker:
        _touch(marker)  # after the commit, so a woken process reads the move
        if approved:
            _touch(marker[: -len(MARKER_SUFFIX)] + APPROVED_SUFFIX)


@functools.cache
def marker_path(database: str) -> str:
    """The file whose every touch says "a job moved" in the SQLite database `database`."""
    return os.path.realpath(database) + MARKER_SUFFIX


def _marker_of(engine: Engine) -> str:
    """The marker file of `engine`'s database; "" where there is none (not SQLite, or not
    a file: nobody else can open an in-memory database)."""
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        return ""
    return marker_path(database)


def _touch(path: str) -> None:
    # Opening for writing and closing is the event the watchers wait for (CLOSE_WRITE).
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except OSError as exc:
        if path not in _untouchable:
            _untouchable.add(path)
            log.warning("cannot touch %s (%s); other processes see job moves later", path, exc)


@event.listens_for(OrmSession, "after_rollback")
def _forget_rolled_back(session: OrmSession) -> None:
    session.info.pop(_MOVED, None)
    session.info.pop(_STATES, None)


def _ring(*, approved: bool) -> None:
    """Count a move some process committed (seen in the database's files) and wake waiters."""
    _count_move(approved=approved)


class StopEvent(threading.Event):
    """A stop flag whose `set` also wakes every waiter (a LISTEN wait too), so a sleeping
    worker or housekeeper stops at once."""

    def set(self) -> None:
        super().set()
        with _local_moves:
            _local_moves.notify_all()
        for waiter in list(_listeners):
            waiter.interrupt()


@dataclass
class Doorbell:
    """The watch of one database file, shared by this process's listeners of that file."""

    path: str
    watch: inotify.Inotify
    thread: threading.Thread
    users: int = 0

    @property
    def running(self) -> bool:
        """Whether its thread still watches (it ends when the folder goes away)."""
        return self.thread.is_alive()

    def stop(self) -> None:
        """End the thread, which releases the inotify instance."""
        self.watch.close()  # wakes the thread
        self.thread.join(timeout=5)


_doorbells: inotify.SharedWatches[Doorbell] = inotify.SharedWatches()
# Files whose watch the kernel refused, markers that could not be touched (said once).
_unwatched: set[str] = set()
_untouchable: set[str] = set()
# What touching the marker does (MODIFY left out: the log's writes must not wake the thread).
_MARKER_MASK = inotify.CLOSE_WRITE | inotify.CREATE | inotify.MOVED_TO


def watch_database(engine: Engine) -> Doorbell | None:
    """Ring this process's waiters whenever a job moves in the SQLite database of `engine`,
    whoever moved it (its marker file is touched): the running watch (one thread per process
    and file, shared), to give back with `release_database`; None where there is none."""
    path = _marker_of(engine)
    if not path or not inotify.supported():
        return None
    try:
        return _doorbells.use(path, lambda: _start_doorbell(path))
    except OSError as exc:
        # Asked again on every idle look of a worker: said once, tried again silently
        # (an inotify limit reached now may be free later).
        if path not in _unwatched:
            _unwatched.add(path)
            log.warning("cannot watch %s for commits (%s); polling instead", path, exc)
        return None


def _start_doorbell(path: str) -> Doorbell:
    """A thread ringing on every touch of the marker file `path` (OSError: the kernel refused)."""
    watch = inotify.Inotify()
    try:
        watch.add(os.path.dirname(path), _MARKER_MASK | inotify.ONLYDIR)
    except OSError:
        watch.close()
        watch.read(0)  # releases its descriptors
        raise
    thread = threading.Thread(
        target=_doorbell, args=(watch, path), name="aat-db-watch", daemon=True
    )
    bell = Doorbell(path=path, watch=watch, thread=thread)
    thread.start()
    return bell


def release_database(bell: Doorbell) -> None:
    """One listener less of `bell`'s file; the last one ends its thread and inotify instance."""
    _doorbells.release(bell.path, bell)


def _doorbell(watch: inotify.Inotify, path: str) -> None:
    name = os.path.basename(path)
    approved = name[: -len(MARKER_SUFFIX)] + APPROVED_SUFFIX
    while not watch.closed:
        events = watch.read()  # sleeps until the folder changes
        # An overflowed queue may have dropped a marker's event: ring for both to be safe.
        lost = any(e.mask & inotify.Q_OVERFLOW for e in events)
        if lost or any(e.name == approved for e in events):
            _ring(approved=True)
        elif any(e.name == name for e in events):
            _ring(approved=False)
        if any(event.mask & inotify.SELF_GONE for event in events):
            break  # the folder went away: waiters poll from now on
    watch.close()
    watch.read(0)


def _wait_local(seen: int, timeout_s: float, stop: threading.Event, *, only_approved: bool) -> int:
    """Block until the count of moves (committed here or rung; with `only_approved`, of those
    into `approved`) is no longer `seen`, `stop` is set or `timeout_s` passes; the count then."""

    def count() -> int:
        return _approved_count if only_approved else _local_count

    with _local_moves:
        _local_moves.wait_for(lambda: count() != seen or stop.is_set(), timeout=timeout_s)
        return count()


def notify_job(session: Session, job_id: int, state: JobState) -> None:
    """Announce that job `job_id` is now in `state`, when the transaction commits."""
    bind = session.get_bind()
    session.info[_MOVED] = _marker_of(bind if isinstance(bind, Engine) else bind.engine)
    session.info.setdefault(_STATES, set()).add(state)
    if bind.dialect.name != "postgresql":
        return
    session.connection().execute(
        text(f"SELECT pg_notify({CHANNEL_SQL}, :payload)"),
        {"payload": f"{job_id}:{state.value}"},
    )


# Waiters on a LISTEN connection, which a StopEvent must interrupt (their own pipe).
_listeners: weakref.WeakSet[JobNotifications] = weakref.WeakSet()


class JobNotifications:
    """Waits until some job moves (PostgreSQL's NOTIFY, the SQLite marker file, a move in
    this process), or simply for the timeout where there is no such signal. A move since the
    last wait returned (or since this was made) ends the next wait at once. With
    `only_approved`, only moves into `approved` count."""

    def __init__(self, engine: Engine, *, only_approved: bool = False) -> None:
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._engine = engine
        self._bell: Doorbell | None = None
        self._only_approved = only_approved
        self._seen = _approved_count if only_approved else _local_count
        self._wake_r = self._wake_w = -1
        self._pipe_lock = threading.Lock()  # the pipe is never written once closed
        self._relisten_at = float("inf")  # when to open a LISTEN connection again
        self._lost = False  # a LISTEN connection broke (or could not be opened) and is said so
        if engine.dialect.name == "postgresql":
            self._listen(engine)

    def _listen(self, engine: Engine) -> None:
        # Imported here: a SQLite-only process (`aat mcp`) never pays for the driver.
        import psycopg

        self._relisten_at = time.monotonic() + RELISTEN_S
        from psycopg.conninfo import make_conninfo

        url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        conninfo = make_conninfo(url, **pg_link_args(engine.url))
        try:
            conn = psycopg.connect(conninfo, autocommit=True)
            row = conn.execute(f"SELECT {CHANNEL_SQL}").fetchone()
            conn.execute(f'LISTEN "{row[0] if row else "aat_jobs"}"')
        except psycopg.Error as exc:
            if not self._lost:  # one line while the database stays away
                log.warning("cannot LISTEN for job moves (%s); polling instead", type(exc).__name__)
            self._lost = True
            return
        if self._lost:
            log.info("listening for job moves again")
        self._lost = False
        self._conn = conn
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        _listeners.add(self)

    @property
    def listening(self) -> bool:
        """True while every job move, in any process, wakes `wait` up early."""
        if self._conn is not None:
            return True
        if self._engine.dialect.name == "postgresql":
            # A broken link (a server restart, a dropped link) ended the last one: a move
            # committed before the new LISTEN is found by the pass this answer precedes.
            if time.monotonic() >= self._relisten_at:
                self._listen(self._engine)
            return self._conn is not None
        if self._bell is not None and not self._bell.running:
            release_database(self._bell)  # its folder went away
            self._bell = None
        if self._bell is None:
            self._bell = watch_database(self._engine)
        return self._bell is not None

    def wait(self, timeout_s: float, stop: threading.Event) -> bool:
        """Block until a job moves, `timeout_s` passes or `stop` is set; True if woken by a move."""
        if self._conn is None:
            seen = self._seen
            self._seen = _wait_local(seen, timeout_s, stop, only_approved=self._only_approved)
            return self._seen != seen
        import psycopg

        try:
            return self._wait_notify(self._conn, timeout_s, stop)
        except psycopg.Error as exc:
            log.warning("lost the LISTEN connection (%s); polling instead", type(exc).__name__)
            self._lost = True
            self.close()
            self._relisten_at = time.monotonic()  # at the next look
            stop.wait(min(timeout_s, 1.0))
        return False

    def _wait_notify(
        self, conn: psycopg.Connection[tuple[object, ...]], timeout_s: float, stop: threading.Event
    ) -> bool:
        # psycopg's own wait wakes every 0.1 s to look for Ctrl-C: a poll on the socket and
        # this waiter's pipe (written by StopEvent) sleeps for the whole timeout instead.
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            if self._queued(conn):
                return True  # queued while the waiter was busy, or just arrived
            left = deadline - time.monotonic()
            if stop.is_set() or left <= 0:
                return False
            poller = select.poll()
            poller.register(conn.fileno(), select.POLLIN)
            poller.register(self._wake_r, select.POLLIN)
            ready = {fd for fd, _ in poller.poll(left * 1000)}
            if self._wake_r in ready:
                with contextlib.suppress(OSError):
                    os.read(self._wake_r, 512)
                return False
            if not ready:
                return False

    def _queued(self, conn: psycopg.Connection[tuple[object, ...]]) -> bool:
        """Whether a move that counts arrived (several queued cost a waiter only as many quick
        looks for work); with `only_approved`, those into other states are read and dropped."""
        if not self._only_approved:
            return any(True for _ in conn.notifies(timeout=0, stop_after=1))
        # The payload is `job_id:state` (`notify_job`).
        return any(n.payload.endswith(":approved") for n in conn.notifies(timeout=0))

    def interrupt(self) -> None:
        """End a LISTEN wait now (from any thread); it returns False."""
        with self._pipe_lock, contextlib.suppress(OSError):
            if self._wake_w >= 0:
                os.write(self._wake_w, b"x")

    def close(self) -> None:
        """Stop listening."""
        if self._bell is not None:
            bell, self._bell = self._bell, None
            release_database(bell)
        if self._conn is not None:
            import psycopg

            _listeners.discard(self)
            conn, self._conn = self._conn, None
            with contextlib.suppress(psycopg.Error):
                conn.close()
            with self._pipe_lock:
                for fd in (self._wake_r, self._wake_w):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self._wake_r = self._wake_w = -1
