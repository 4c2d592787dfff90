"""Shared fixtures: settings with their own AAT_HOME, and a real database per test.

Every test using `settings` or `engine` runs on a fresh SQLite file under `tmp_path`; when
AAT_TEST_PG_URL is set (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/postgres) it
runs again on PostgreSQL, in a schema of its own that is dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, make_url, text

from webplatform.config import Settings
from webplatform.store import make_engine

PG_URL = os.environ.get("AAT_TEST_PG_URL", "")
BACKENDS = ["sqlite", "postgresql"] if PG_URL else ["sqlite"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The database kind a test runs on: "sqlite", and "postgresql" when configured."""
    return str(request.param)


@pytest.fixture
def settings(backend: str, tmp_path: Path) -> Iterator[Settings]:
    """Settings with AAT_HOME in tmp_path and a database nobody else uses."""
    home = tmp_path / "aat-home"
    if backend == "sqlite":
        yield Settings(home=home)
        return
    schema = f"aat_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(PG_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield Settings(home=home, db_url=url.render_as_string(hide_password=False))
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    """A migrated engine on the test's own database."""
    eng = make_engine(settings)
    try:
        yield eng
    finally:
        eng.dispose()
