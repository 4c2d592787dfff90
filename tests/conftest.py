"""Shared fixtures, and the test tiers.

Tiers (markers; `make fast` runs `unit and not postgresql`, `make test` runs everything):

- `unit`: the default, set here on every test that has none of the markers below. One
  process (in-process apps, threads, tool scripts run by the runner), SQLite or PostgreSQL.
- `integration`: starts real `aat` processes (`aat serve`, `aat mcp`, the CLI), several
  processes at once, or a third-party client from tests/mcp/node (Inspector, opencode).
  Every test under tests/integration/ gets it; elsewhere mark the test or module yourself:
  `pytestmark = pytest.mark.integration`.
- `browser`: drives headless Chromium; every test under tests/browser/ gets it.
- `slow`: takes seconds on its own (builds a wheel, hundreds of jobs); mark it yourself.
- `postgresql`: set here on every test that runs on PostgreSQL (the `postgresql` case of
  `backend`, or any use of `pg_url`/`pg_settings`), so `make fast` never needs a server.

Rule for a new test: if it starts a process of ours or a client from tests/mcp/node, mark
it `integration` (a `unit` test that does fails, saying so); if it takes more than a few
seconds, `slow`. `make fast` should stay near a minute on two cores (`--durations=20` shows
what to move).

Every test using `settings` or `engine` runs twice: on a fresh SQLite file under `tmp_path`,
and on PostgreSQL in a schema of its own (new, or one an earlier test left at alembic's head,
emptied and renamed: tests/pg_schemas.py). The PostgreSQL server is
AAT_TEST_PG_URL when set (`.ci/run` starts one and sets it); otherwise the session starts a
throwaway server from /usr/lib/postgresql/*/bin itself (one per run: under pytest-xdist the
first worker that needs it starts it, the others reuse it). With neither, PostgreSQL tests
fail with a message saying how to get one: they are never skipped.

Under pytest-xdist (`make test`, `make fast`) a test file runs on one worker (`--dist
loadfile`), so module-scoped fixtures are started once; ports come from `free_port()`
(tests/serving.py) and folders from `tmp_path`, never fixed ones.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from argon2 import PasswordHasher, profiles
from pg_schemas import drop_kept, pg_schema, record_head_shape
from pg_server import HOW_TO, start_server, throwaway_server
from sqlalchemy import Engine, event
from workspaces import aat_home_beside

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import engine as engine_module
from webplatform.store import make_engine, operators, passwords

TESTS = Path(__file__).resolve().parent
# Every Platform would start an inotify watcher on its registry, and a test worker makes
# hundreds: more than the kernel's 128 inotify instances per user. Tests read the registry by
# its stat scan (always correct); tests/registry/test_watch.py watches explicitly.
os.environ.setdefault("AAT_WATCH_REGISTRY", "0")
# Folders whose every test is in a tier other than `unit`.
FOLDER_TIERS = {"integration": "integration", "browser": "browser"}
NOT_UNIT = {"integration", "browser", "slow"}
PG_FIXTURES = {"pg_url", "pg_settings"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects anything
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each test its tier markers (see the module docstring)."""
    for item in items:
        folder = _top_folder(item.path)
        if folder in FOLDER_TIERS:
            item.add_marker(FOLDER_TIERS[folder])
        callspec = getattr(item, "callspec", None)
        on_pg = callspec is not None and callspec.params.get("backend") == "postgresql"
        if on_pg or PG_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker("postgresql")
        if not any(item.get_closest_marker(name) for name in NOT_UNIT):
            item.add_marker("unit")
    _heaviest_files_first(items)


# How long a file's tests usually keep a worker busy, by their heaviest tier: xdist hands
# out whole files in collection order, so a long file collected last would run alone at the
# end while the other workers idle.
_TIER_WEIGHT = {"browser": 0, "slow": 1, "integration": 2, "postgresql": 3}


def _heaviest_files_first(items: list[pytest.Item]) -> None:
    """Order the files by their heaviest tier (browser, slow, integration, PostgreSQL, unit),
    keeping each file's tests together and in their own order."""
    rank: dict[Path, int] = {}
    for item in items:
        weights = [w for name, w in _TIER_WEIGHT.items() if item.get_closest_marker(name)]
        rank[item.path] = min(rank.get(item.path, len(_TIER_WEIGHT)), *weights, len(_TIER_WEIGHT))
    first_seen = {path: n for n, path in enumerate(dict.fromkeys(item.path for item in items))}
    items.sort(key=lambda item: (rank[item.path], first_seen[item.path]))


@pytest.fixture(autouse=True)
def _unit_tests_start_no_aat_process(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `unit` test that starts `aat` or an npm client fails, naming the marker it needs."""
    if request.node.get_closest_marker("unit") is None:
        return
    real_init = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[bytes], args: Any, *more: Any, **kw: Any) -> None:
        if _starts_ours(args):
            pytest.fail(
                f"this test starts {args!r}: mark it `integration` (tests/conftest.py)",
                pytrace=False,
            )
        real_init(self, args, *more, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)


def _starts_ours(args: Any) -> bool:
    """True for `python -m webplatform ...`, the `aat` script, or anything in node_modules."""
    argv = [args] if isinstance(args, str | bytes | os.PathLike) else list(args)
    words = [os.fsdecode(a) for a in argv]
    if any(a == "-m" and b == "webplatform" for a, b in zip(words, words[1:], strict=False)):
        return True
    return bool(words) and (
        Path(words[0]).name in {"aat", "node", "npx", "npm"} or "node_modules" in words[0]
    )


def _top_folder(path: Path) -> str:
    """`integration` for tests/integration/x/test_y.py; "" outside tests/."""
    try:
        return path.resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return ""


BACKENDS = ["sqlite", "postgresql"]
# A preview (a confined process) starts slowly on a loaded machine, and one run again before
# a run that times out sends its call back; the tests of that timeout set their own.
PREVIEW_S = 30.0


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PostgreSQL server URL for the whole session: AAT_TEST_PG_URL, or one started here."""
    configured = os.environ.get("AAT_TEST_PG_URL", "")
    if configured:
        yield configured
        drop_kept(configured)
        return
    try:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            url = _shared_server(tmp_path_factory)
            yield url
            drop_kept(url)
            return
        server = throwaway_server()
        url = server.__enter__()
    except RuntimeError as exc:
        pytest.fail(str(exc) if HOW_TO in str(exc) else f"{exc}\n{HOW_TO}", pytrace=False)
    try:
        yield url
    finally:
        server.__exit__(None, None, None)


def _shared_server(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One throwaway server for all xdist workers of this run, started by the first to ask.

    It lives until the xdist controller (the workers' parent) exits: its watchdog stops it.
    """
    run_dir = tmp_path_factory.getbasetemp().parent  # shared by this run's workers
    with (run_dir / "pg-server.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        known = run_dir / "pg-server.url"
        if not known.exists():
            known.write_text(start_server(owner_pid=os.getppid()).url)
        return known.read_text()


@pytest.fixture(scope="session", autouse=True)
def project_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Tests run from a project folder of their own, as a user would.

    The caller's folder is a workspace (SPEC §14), and the checkout that holds aat's
    installation may not be one: `aat mcp` or `aat run` started from it would refuse tools.
    """
    folder = tmp_path_factory.mktemp("project")
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield folder
    finally:
        os.chdir(before)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The database kind a test runs on: "sqlite" and "postgresql"."""
    return str(request.param)


@pytest.fixture
def settings(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Settings]:
    """Settings with their own AAT_HOME, `tmp_path` as workspace, a database nobody else uses."""
    home = aat_home_beside(tmp_path)
    if backend == "sqlite":
        yield Settings(home=home, workspaces=str(tmp_path), preview_timeout_s=PREVIEW_S)
        return
    # Looked up only here, so a SQLite-only selection never starts a PostgreSQL server.
    server_url = str(request.getfixturevalue("pg_url"))
    with pg_schema(server_url, reuse=_may_reuse(request)) as url:
        yield Settings(home=home, db_url=url, workspaces=str(tmp_path), preview_timeout_s=PREVIEW_S)


@pytest.fixture
def pg_settings(pg_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Settings]:
    """Settings on PostgreSQL only (for the several-hosts path), in a schema of its own."""
    with pg_schema(pg_url, reuse=_may_reuse(request)) as url:
        yield Settings(home=aat_home_beside(tmp_path), db_url=url, workspaces=str(tmp_path))


def _may_reuse(request: pytest.FixtureRequest) -> bool:
    """Whether the test may get an emptied schema at alembic's head (tests/pg_schemas.py):
    not where `copied_migrations` is overridden, so alembic runs on an empty one."""
    return request.getfixturevalue("copied_migrations") is True


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    """A migrated engine on the test's own database."""
    eng = make_engine(settings)
    try:
        yield eng
    finally:
        eng.dispose()


@pytest.fixture
def platform_settings(settings: Settings) -> Settings:
    """The settings `platform` is made from: `settings` as they are (the example registry, on
    both databases). A module or folder that needs other ones (another registry, a setting
    changed, a SQLite-only AAT_HOME) overrides this fixture, never `platform` itself."""
    return settings


@pytest.fixture
def platform(platform_settings: Settings) -> Iterator[Platform]:
    """The platform under test, on `platform_settings`; its engine is closed afterwards."""
    plat = Platform(platform_settings)
    yield plat
    plat.engine.dispose()


@pytest.fixture(autouse=True)
def cheap_password_hashing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Operator passwords hashed with argon2's cheapest parameters in this process.

    argon2-cffi's defaults (64 MiB, 3 passes, 4 lanes) cost 0.1-0.2 CPU-s per hash or check,
    and a dashboard test adds operators, logs in and steps up several times: argon2 was the
    largest CPU cost of the unit tier. The hashes are still real argon2id; the parameters
    themselves and the upgrade of a weak hash are checked in tests/store/test_operators.py,
    which overrides this fixture.
    """
    cheapest = PasswordHasher.from_parameters(profiles.CHEAPEST)
    monkeypatch.setattr(passwords, "_hasher", lambda: cheapest)
    operators._dummy_hash.cache_clear()  # noqa: SLF001 (built with whichever hasher was set)
    yield
    operators._dummy_hash.cache_clear()  # noqa: SLF001


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated to head by alembic, once per test process."""
    home = tmp_path_factory.mktemp("migrated") / "aat-home"
    make_engine(Settings(home=home)).dispose()
    return home / "aat.db"


@pytest.fixture(autouse=True)
def copied_migrations(migrated_sqlite: Path, monkeypatch: pytest.MonkeyPatch) -> bool:
    """A fresh, empty database gets alembic's schema without running alembic again.

    Running alembic costs ~70 ms of CPU per database, and most tests open one or two: a
    tenth of the unit tier's CPU. An empty SQLite file gets the pages of `migrated_sqlite`;
    an empty PostgreSQL schema gets the statements alembic sent for the first one this
    process migrated, replayed. Either way it is alembic's own result (same revision, same
    tables), and everything else `make_engine` does (the private file, WAL, the pragmas)
    still runs. A database that is not empty is migrated by alembic as always;
    tests/store/test_engine.py and test_schema_head.py override this fixture so the real
    migrations run there on empty databases too. True: a PostgreSQL test may get a schema an
    earlier test left at head, emptied (tests/pg_schemas.py).
    """
    real_upgrade = engine_module._upgrade  # noqa: SLF001

    def upgrade(engine: Engine) -> None:
        if engine.dialect.name == "sqlite" and _empty_sqlite(engine):
            with engine.connect() as conn, sqlite3.connect(migrated_sqlite) as source:
                source.backup(conn.connection.dbapi_connection)  # type: ignore[arg-type]
        elif engine.dialect.name == "postgresql" and _empty_pg_schema(engine):
            _replay_pg_migration(engine, real_upgrade)
        else:
            real_upgrade(engine)

    monkeypatch.setattr(engine_module, "_upgrade", upgrade)
    return True


# What alembic sent to migrate an empty PostgreSQL schema, in order (recorded once per process).
_PG_MIGRATION: list[tuple[str, Any]] = []


def _replay_pg_migration(engine: Engine, real_upgrade: Callable[[Engine], None]) -> None:
    """Migrate an empty schema: the first time by alembic, recording what it sends; after
    that by sending the same statements (unqualified, so they land in this schema)."""
    if _PG_MIGRATION:
        with engine.begin() as conn:
            for statement, parameters in _PG_MIGRATION:
                conn.exec_driver_sql(statement, parameters)
        return
    sent: list[tuple[str, Any]] = []

    def record(*args: Any) -> None:
        sent.append((args[2], args[3]))  # statement, parameters (a list for executemany)

    event.listen(engine, "before_cursor_execute", record)
    try:
        real_upgrade(engine)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    with engine.connect() as conn:
        record_head_shape(conn)
    if not _PG_MIGRATION:  # two threads may have migrated at once: keep one recording
        _PG_MIGRATION.extend(sent)


def _empty_pg_schema(engine: Engine) -> bool:
    """True when the connection's schema has no table at all (nothing alembic ever made)."""
    query = "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
    with engine.connect() as conn:
        return conn.exec_driver_sql(query).scalar() == 0


def _empty_sqlite(engine: Engine) -> bool:
    """True when the SQLite database has no table at all (nothing alembic ever made)."""
    with engine.connect() as conn:
        return conn.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar() == 0
