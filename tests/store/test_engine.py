"""The engine: a private SQLite file in WAL mode, idempotent concurrent migrations, UTC times."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from pydantic import SecretStr
from sqlalchemy import Engine, inspect, make_url, text
from sqlmodel import SQLModel, select

from webplatform.config import Settings
from webplatform.store import Meta, make_engine, migrate, session_scope, transact
from webplatform.store.engine import PG_LINK_DEFAULTS, head_revision, is_locked_error
from webplatform.store.models import Heartbeat
from webplatform.store.notify import JobNotifications


@pytest.fixture(autouse=True)
def copied_migrations() -> None:
    """Here alembic itself migrates every database (tests/conftest.py copies its result)."""


REPO = Path(__file__).resolve().parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_sqlite_file_and_home_are_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    old = os.umask(0)  # even a careless umask must not leak the database
    try:
        engine = make_engine(Settings(home=home))
    finally:
        os.umask(old)
    engine.dispose()
    assert _mode(home) == 0o700
    assert _mode(home / "aat.db") == 0o600


def test_existing_world_readable_file_is_tightened(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "aat.db").touch(mode=0o644)
    os.chmod(home / "aat.db", 0o644)
    make_engine(Settings(home=home)).dispose()
    assert _mode(home / "aat.db") == 0o600


def test_sqlite_runs_in_wal_mode_with_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(Settings(home=tmp_path / "home"))
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10_000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


def test_schema_matches_models_and_migrating_again_changes_nothing(engine: Engine) -> None:
    migrate(engine)
    migrate(engine)
    with engine.connect() as conn:
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        assert version == head_revision()
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, SQLModel.metadata) == []
    tables = set(inspect(engine).get_table_names())
    assert {"job", "audit_event", "operator", "operator_session", "heartbeat", "meta"} <= tables


@pytest.mark.integration
def test_processes_starting_at_once_all_migrate_cleanly(settings: Settings) -> None:
    env = {
        **os.environ,
        "AAT_HOME": str(settings.home),
        "AAT_DB_URL": settings.db_url.get_secret_value(),
    }
    code = (
        "from webplatform.config import Settings\n"
        "from webplatform.store import make_engine\n"
        "make_engine(Settings()).dispose()\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    engine = make_engine(settings)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
    engine.dispose()


def test_timestamps_come_back_aware_utc(engine: Engine) -> None:
    paris_summer = timezone(timedelta(hours=2))
    seen = datetime(2025, 7, 1, 14, 30, 15, 123456, tzinfo=paris_summer)
    with session_scope(engine) as session:
        session.add(Heartbeat(id="p1", role="worker", host="h", pid=1, seen_at=seen))
    with session_scope(engine, write=False) as session:
        row = session.exec(select(Heartbeat)).one()
    assert row.seen_at == seen
    assert row.seen_at.tzinfo is UTC
    assert row.seen_at.hour == 12


def test_naive_timestamps_are_refused(engine: Engine) -> None:
    with pytest.raises(Exception, match="naive datetime"), session_scope(engine) as session:
        session.add(
            Heartbeat(id="p1", role="worker", host="h", pid=1, seen_at=datetime(2025, 1, 1))
        )
        session.flush()


def test_session_scope_rolls_back_on_error(engine: Engine) -> None:
    with pytest.raises(RuntimeError), session_scope(engine) as session:
        session.add(Meta(key="k", value="v"))
        session.flush()
        raise RuntimeError("boom")
    with session_scope(engine, write=False) as session:
        assert session.get(Meta, "k") is None


def test_many_concurrent_writers_never_see_database_is_locked(engine: Engine) -> None:
    errors: list[BaseException] = []

    def write(n: int) -> None:
        for i in range(25):
            key = f"w{n}-{i}"
            try:
                transact(engine, lambda s, key=key: s.add(Meta(key=key, value="x")))
            except BaseException as exc:  # collected: a thread's exception would be lost
                errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with session_scope(engine, write=False) as session:
        assert len(session.exec(select(Meta)).all()) == 12 * 25


def test_transact_retries_only_lock_errors(engine: Engine) -> None:
    calls = 0

    def fail(_session: object) -> None:
        nonlocal calls
        calls += 1
        raise ValueError("not a lock problem")

    with pytest.raises(ValueError):
        transact(engine, fail)
    assert calls == 1
    assert not is_locked_error(ValueError("database is locked"))


@pytest.mark.postgresql
def test_postgresql_links_time_out_and_the_urls_own_values_win(pg_settings: Settings) -> None:
    """Every PostgreSQL connection (the engine's and LISTEN's) has libpq's link timeouts, so a
    link that silently drops packets fails a statement instead of hanging it (the effect is
    tests/integration/test_database_cut.py); a value the URL sets is the one used."""
    url = make_url(pg_settings.database_url).update_query_dict({"tcp_user_timeout": "60000"})
    settings = pg_settings.model_copy(update={"db_url": SecretStr(url.render_as_string(False))})
    engine = make_engine(settings)
    waiter = JobNotifications(engine)
    try:
        raw = engine.raw_connection()
        try:
            pooled = raw.driver_connection.info.get_parameters()  # type: ignore[union-attr]
        finally:
            raw.close()
        assert waiter.listening
        listening = waiter._conn.info.get_parameters()  # type: ignore[union-attr]
    finally:
        waiter.close()
        engine.dispose()
    for used in (pooled, listening):
        assert used["tcp_user_timeout"] == "60000"
        assert {k: used[k] for k in PG_LINK_DEFAULTS if k != "tcp_user_timeout"} == {
            k: v for k, v in PG_LINK_DEFAULTS.items() if k != "tcp_user_timeout"
        }


@pytest.mark.postgresql
def test_postgresql_sessions_idle_in_a_transaction_end_and_the_urls_options_win(
    pg_settings: Settings,
) -> None:
    """Each session ends after AAT_DB_IDLE_IN_TRANSACTION_S idle inside a transaction (its
    effect is tests/integration/test_frozen_in_transaction.py), the URL's own options (this
    test's schema) still apply, and a value the URL's options set wins; 0 sets none."""
    url = make_url(pg_settings.database_url)
    own = f"{url.query['options']} -c idle_in_transaction_session_timeout=7s"
    cases = {
        "1min": pg_settings,
        "7s": pg_settings.model_copy(
            update={
                "db_url": SecretStr(url.update_query_dict({"options": own}).render_as_string(False))
            }
        ),
        "0": pg_settings.model_copy(update={"db_idle_in_transaction_s": 0.0}),
    }
    for expected, settings in cases.items():
        engine = make_engine(settings)
        try:
            with engine.connect() as conn:
                shown = conn.execute(text("SHOW idle_in_transaction_session_timeout")).scalar()
                schema = conn.execute(text("SELECT current_schema()")).scalar()
        finally:
            engine.dispose()
        assert (shown, schema) == (expected, url.query["options"].split("=", 1)[1])
