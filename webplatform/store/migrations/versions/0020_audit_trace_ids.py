"""Audit events name the span they were recorded in (SPEC §23): `audit_event.trace_id` and
`audit_event.span_id`, hex, empty for every event recorded before or without tracing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0020", "0019"


def upgrade() -> None:
    with op.batch_alter_table("audit_event") as batch:
        batch.add_column(sa.Column("trace_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("span_id", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_event") as batch:
        batch.drop_column("span_id")
        batch.drop_column("trace_id")
