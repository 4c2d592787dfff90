"""The engine and sessions: SQLite under AAT_HOME by default, PostgreSQL via AAT_DB_URL.

`make_engine(settings)` prepares the database (owner-only file, WAL, migrations) so every
process that opens it, concurrently or not, sees the same schema. `transact(engine, fn)`
is the one door for every transaction (surfaces reach it as `Platform.transact`): it retries
SQLite's "database is locked" with a bounded backoff so users never see it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import random
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event, make_url, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from webplatform.config import DatabaseUnreachable, HomeUnavailable, Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000
# Any fixed 64-bit number works; it only has to be the same in every aat process.
PG_MIGRATION_LOCK = 0x0AA7_0001
_WRITE_OPTION = "aat_write"
# The longest pause between two attempts of a locked write (jitter adds up to as much again).
_MAX_BACKOFF_S = 1.0
# libpq's link settings for a database on the LAN. A link that stops delivering without
# closing (a cable pulled, a firewall dropping packets) then fails a statement within seconds
# (data unacknowledged for `tcp_user_timeout` ms; an idle connection's keepalive probes
# unanswered as long) instead of hanging it until the kernel gives up retransmitting, about 15
# minutes later. A value set in `AAT_DB_URL` wins (`?tcp_user_timeout=60000`); so does
# PGCONNECT_TIMEOUT.
PG_LINK_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}
_PG_ENVIRONMENT = {"connect_timeout": "PGCONNECT_TIMEOUT"}


def make_engine(settings: Settings) -> Engine:
    """An engine for `settings.database_url`, with the schema migrated to the latest version.

    Raises `HomeUnavailable` when this OS user cannot open `AAT_HOME` or the SQLite file in it,
    and `DatabaseUnreachable` when a database server does not take the first connection.
    """
    url = make_url(settings.database_url)
    try:
        # AAT_HOME holds tool output (the outbox) on every backend: private from the start,
        # rather than left for the first tool to create with the default umask.
        settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        if url.get_backend_name() == "sqlite":
            engine = _sqlite_engine(url, settings.home)
        else:
            connect_args = pg_link_args(url) | _session_options(url, settings)
            engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    except PermissionError as exc:
        raise HomeUnavailable(settings.home) from exc
    if url.get_backend_name() != "sqlite":
        _first_connection(engine, url)
    migrate(engine)
    return engine


def pg_link_args(url: URL) -> dict[str, str]:
    """The `PG_LINK_DEFAULTS` that `url` (its query) and libpq's environment leave unset, as
    connect arguments: given to the driver, they would override the URL's own values."""
    return {
        name: value
        for name, value in PG_LINK_DEFAULTS.items()
        if name not in url.query and not os.environ.get(_PG_ENVIRONMENT.get(name, ""))
    }


def _session_options(url: URL, settings: Settings) -> dict[str, str]:
    """libpq's `options` that end a session left idle in a transaction after
    `AAT_DB_IDLE_IN_TRANSACTION_S` (none for 0), before the URL's own options (or else
    PGOPTIONS), which come later and so win for any setting both name."""
    limit_ms = round(settings.db_idle_in_transaction_s * 1000)
    if limit_ms == 0:
        return {}
    theirs = url.query.get("options", os.environ.get("PGOPTIONS", ""))
    if not isinstance(theirs, str):
        theirs = " ".join(theirs)  # named twice in the URL
    ours = f"-c idle_in_transaction_session_timeout={limit_ms}"
    return {"options": f"{ours} {theirs}".strip()}


def _first_connection(engine: Engine, url: URL) -> None:
    """Connect once, so a server that is down is said in one line rather than a traceback
    from deep inside the migrations."""
    try:
        with engine.connect():
            pass
    except OperationalError as exc:
        engine.dispose()
        reason = (str(exc.orig or exc).strip().splitlines() or ["no reason given"])[0]
        raise DatabaseUnreachable(url.render_as_string(hide_password=True), reason) from None


def _sqlite_engine(url: URL, home: Path) -> Engine:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        _create_private_file(Path(database))
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000},
        pool_size=10,
        max_overflow=20,
    )
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _create_private_file(path: Path) -> None:
    """Create the database file 0600 before SQLite does, so it is never world-readable."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        # An older file (or a loose umask elsewhere) gets tightened too.
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take BEGIN away from the sqlite3 module so `_sqlite_on_begin` decides which kind.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        # Durable enough with WAL (a power cut may lose the last commit, never corrupt).
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _sqlite_on_begin(conn: Any) -> None:
    # A deferred transaction that reads and then writes cannot wait for the lock (SQLite
    # answers "database is locked" at once); BEGIN IMMEDIATE takes it up front and lets
    # busy_timeout do the waiting. Readers keep plain BEGIN so they never queue on writers.
    write = conn.get_execution_options().get(_WRITE_OPTION, True)
    statement = "BEGIN IMMEDIATE" if write else "BEGIN"
    # Straight to the driver: through `exec_driver_sql` this one statement cost as much as
    # the rest of a small transaction's statements (two transactions on every call). Its
    # error is raised as SQLAlchemy's, so `transact` still retries a locked database.
    try:
        conn.connection.driver_connection.execute(statement)
    except sqlite3.OperationalError as exc:
        raise OperationalError(statement, None, exc) from exc


@contextlib.contextmanager
def session_scope(engine: Engine, *, write: bool = True) -> Iterator[Session]:
    """A session that commits when the block ends and rolls back if it raises.

    Objects stay readable after the block (no expiry on commit). `write=False` is for
    read-only work: on SQLite it does not take the write lock.
    """
    bind = engine if write else engine.execution_options(**{_WRITE_OPTION: False})
    session = Session(bind, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def is_locked_error(exc: BaseException) -> bool:
    """True for SQLite's transient "database is locked" / "database is busy"."""
    message = str(getattr(exc, "orig", exc)).lower()
    return isinstance(exc, OperationalError) and (
        "database is locked" in message or "database is busy" in message
    )


def transact(
    engine: Engine, fn: Callable[[Session], T], *, write: bool = True, attempts: int = 6
) -> T:
    """Run `fn(session)` in one transaction and return its result, retrying lock timeouts.

    `fn` may run more than once, so it must only touch the database (no side effects
    outside it). Other exceptions propagate at once, after a rollback.
    """
    delay = 0.05
    for attempt in range(1, attempts + 1):
        try:
            with session_scope(engine, write=write) as session:
                return fn(session)
        except OperationalError as exc:
            if attempt == attempts or not is_locked_error(exc):
                raise
            log.debug("database locked (attempt %d of %d); retrying", attempt, attempts)
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, _MAX_BACKOFF_S)
    raise AssertionError("unreachable")  # pragma: no cover


def migrate(engine: Engine) -> None:
    """Bring the schema to the latest migration; safe to call from several processes at once."""
    if _schema_is_current(engine):
        # Every `aat mcp` start opens the database: importing and running alembic only to
        # learn there is nothing to do would cost it a few hundred milliseconds each time.
        return
    if engine.dialect.name == "sqlite":
        with _sqlite_migration_lock(engine):
            _upgrade(engine)
    elif engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": PG_MIGRATION_LOCK})
            conn.commit()
            try:
                _upgrade(engine)
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PG_MIGRATION_LOCK})
                conn.commit()
    else:
        _upgrade(engine)


# A script names itself and its parent on one line, as script.py.mako writes it
# (`revision, down_revision = "0003", "0002"`), or on two, as alembic's own template does.
_REVISION = re.compile(r"^(revision|down_revision|revision, down_revision) = (.+)$", re.M)
_IDS = "[\"']([^\"']+)[\"']"
_VALUE = re.compile(rf"(?:None|{_IDS})(?:, (?:None|{_IDS}))?$")


def _ids_of(script: str) -> dict[str, str | None]:
    """The `revision` and `down_revision` a script assigns (left out: it assigns none)."""
    found: dict[str, str | None] = {}
    for line in _REVISION.finditer(script):
        value = _VALUE.match(line.group(2))
        if value is not None:
            names = line.group(1).split(", ")
            found.update(zip(names, value.groups(), strict=False))
    return found


def head_revision() -> str | None:
    """The one head of the migration scripts (read from their text), or None if unclear
    (several heads, or a script that names no revision)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (Path(__file__).parent / "migrations" / "versions").glob("*.py"):
        ids = _ids_of(script.read_text())
        if not ids.get("revision"):
            return None
        revisions.add(str(ids["revision"]))
        if ids.get("down_revision"):
            parents.add(str(ids["down_revision"]))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _schema_is_current(engine: Engine) -> bool:
    """True when the database is already at the scripts' single head (no alembic needed)."""
    head = head_revision()
    if head is None:
        return False
    try:
        with engine.connect() as conn:
            versions = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    except Exception:  # no table yet, or unreadable: let alembic decide and report
        return False
    return [row[0] for row in versions] == [head]


@contextlib.contextmanager
def _sqlite_migration_lock(engine: Engine) -> Iterator[None]:
    database = engine.url.database or ""
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    # Next to the database file, which is AAT_HOME unless AAT_DB_URL points elsewhere.
    lock_path = Path(database).parent / ".aat-migrate.lock"
    fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _upgrade(engine: Engine) -> None:
    # Imported here: alembic is only needed when a process opens the database.
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
