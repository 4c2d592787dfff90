"""Shared fixtures: settings with their own AAT_HOME, and a real database per test.

Every test using `settings` or `engine` runs twice: on a fresh SQLite file under `tmp_path`,
and on PostgreSQL in a schema of its own that is dropped afterwards. The PostgreSQL server is
AAT_TEST_PG_URL when set (`.ci/run` starts one and sets it); otherwise the session starts a
throwaway server from /usr/lib/postgresql/*/bin itself. With neither, PostgreSQL tests fail
with a message saying how to get one: they are never skipped.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pg_server import HOW_TO, throwaway_server
from sqlalchemy import Engine, create_engine, make_url, text
from workspaces import aat_home_beside

from webplatform.config import Settings
from webplatform.store import make_engine

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL server URL for the whole session: AAT_TEST_PG_URL, or one started here."""
    configured = os.environ.get("AAT_TEST_PG_URL", "")
    if configured:
        yield configured
        return
    try:
        server = throwaway_server()
        url = server.__enter__()
    except RuntimeError as exc:
        pytest.fail(str(exc) if HOW_TO in str(exc) else f"{exc}\n{HOW_TO}", pytrace=False)
    try:
        yield url
    finally:
        server.__exit__(None, None, None)


@contextmanager
def pg_schema(server_url: str) -> Iterator[str]:
    """A fresh schema on `server_url`; yields a URL whose connections use only that schema."""
    schema = f"aat_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


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
        yield Settings(home=home, workspaces=str(tmp_path))
        return
    # Looked up only here, so a SQLite-only selection never starts a PostgreSQL server.
    server_url = str(request.getfixturevalue("pg_url"))
    with pg_schema(server_url) as url:
        yield Settings(home=home, db_url=url, workspaces=str(tmp_path))


@pytest.fixture
def pg_settings(pg_url: str, tmp_path: Path) -> Iterator[Settings]:
    """Settings on PostgreSQL only (for the several-hosts path), in a schema of its own."""
    with pg_schema(pg_url) as url:
        yield Settings(home=aat_home_beside(tmp_path), db_url=url, workspaces=str(tmp_path))


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    """A migrated engine on the test's own database."""
    eng = make_engine(settings)
    try:
        yield eng
    finally:
        eng.dispose()
