"""A PostgreSQL schema of its own for each test (tests/conftest.py's `settings`, `pg_settings`).

Migrating a new schema costs ~0.25 s of server time (alembic's ~70 DDL statements, replayed),
on each of several hundred PostgreSQL tests. So a schema a test leaves at alembic's head, with
exactly the tables, columns and indexes alembic made, is emptied (TRUNCATE, sequences
restarted) and renamed, and the next test in this process gets it: a database as empty as a
new one, under a name no connection of the last test knows (a thread it left behind fails to
find its tables, as it would in a dropped schema). Any other schema is dropped, as is every
kept one at the end of the session.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, make_url, text
from sqlalchemy.exc import DBAPIError

# Emptied schemas at alembic's head, by server URL, that this process may hand out again.
_FREE: dict[str, list[str]] = {}
# The tables, columns, indexes and revision alembic's head makes (recorded once per process).
_HEAD_SHAPE: list[tuple[Any, ...]] = []


@contextmanager
def pg_schema(server_url: str, *, reuse: bool) -> Iterator[str]:
    """A schema nobody else uses on `server_url`; yields a URL whose connections use only it.

    `reuse`: the test may get an emptied schema already at alembic's head, and leaves its own
    for the next test if it is still exactly that; else the schema is new (empty) and dropped.
    """
    admin = _admin_engine(server_url)
    free = _FREE.setdefault(server_url, [])
    schema = free.pop() if reuse and free else _create(admin)
    try:
        url = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        kept = _emptied(admin, schema) if reuse and _HEAD_SHAPE else None
        if kept is None:
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        else:
            free.append(kept)


def record_head_shape(conn: Connection) -> None:
    """Remember the shape of the schema `conn` uses, just migrated to head by alembic."""
    if not _HEAD_SHAPE:
        schema = str(conn.exec_driver_sql("SELECT current_schema()").scalar())
        _HEAD_SHAPE.extend(_shape(conn, schema))


def drop_kept(server_url: str) -> None:
    """Drop the schemas this process kept for reuse on `server_url`."""
    for schema in _FREE.pop(server_url, []):
        with _admin_engine(server_url).begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@functools.cache
def _admin_engine(server_url: str) -> Engine:
    """One engine per server for this process, to make, empty and drop the tests' schemas (an
    engine per test cost a connection and SQLAlchemy's first-connect queries each time)."""
    return create_engine(server_url, pool_size=1)


def _create(admin: Engine) -> str:
    schema = f"aat_test_{uuid.uuid4().hex[:12]}"
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    return schema


def _emptied(admin: Engine, schema: str) -> str | None:
    """Empty `schema` and rename it; its new name, or None when it is not exactly alembic's
    head (a test changed it) or could not be emptied within 10 s (a transaction left open)."""
    renamed = f"aat_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.begin() as conn:
            conn.exec_driver_sql("SET LOCAL lock_timeout = '10s'")
            if _shape(conn, schema) != _HEAD_SHAPE:
                return None
            tables = [row[1] for row in _HEAD_SHAPE if row[0] == "table"]
            names = ", ".join(f'"{schema}"."{t}"' for t in tables if t != "alembic_version")
            conn.exec_driver_sql(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
            conn.exec_driver_sql(f'ALTER SCHEMA "{schema}" RENAME TO "{renamed}"')
    except DBAPIError:
        return None
    return renamed


def _shape(conn: Connection, schema: str) -> list[tuple[Any, ...]]:
    """The tables, columns (name, type, nullability), indexes and alembic revision of `schema`."""
    tables = conn.execute(
        text("SELECT 'table', tablename FROM pg_tables WHERE schemaname = :s ORDER BY 2"),
        {"s": schema},
    ).all()
    columns = conn.execute(
        text(
            "SELECT 'column', table_name, column_name, data_type, is_nullable"
            " FROM information_schema.columns WHERE table_schema = :s ORDER BY 2, 3"
        ),
        {"s": schema},
    ).all()
    indexes = conn.execute(
        text("SELECT 'index', indexname FROM pg_indexes WHERE schemaname = :s ORDER BY 2"),
        {"s": schema},
    ).all()
    shape = [tuple(row) for row in (*tables, *columns, *indexes)]
    if ("table", "alembic_version") in shape:
        query = f'SELECT version_num FROM "{schema}".alembic_version ORDER BY 1'
        shape += [("revision", row[0]) for row in conn.exec_driver_sql(query)]
    return shape
