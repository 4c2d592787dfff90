"""Alembic environment, run programmatically by `webplatform.store.engine.migrate`.

The caller hands in an open connection (`config.attributes["connection"]`) inside its own
transaction, so the whole upgrade commits or rolls back as one, under its lock.
"""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

from webplatform.store import models  # noqa: F401  (registers the tables on the metadata)

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through webplatform.store.engine.migrate(engine)")

context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
