"""When a pending job's notification and its reminder went out (AAT_NOTIFY).

Revision ID: 0006
Revises: 0005
Create Date: 2025-01-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webplatform.store.models import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("job", sa.Column("notified_at", UTCDateTime(), nullable=True))
    op.add_column("job", sa.Column("reminded_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column("job", "reminded_at")
    op.drop_column("job", "notified_at")
