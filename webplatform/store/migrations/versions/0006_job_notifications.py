"""When a pending job's notification and its reminder went out (AAT_NOTIFY)."""

import sqlalchemy as sa
from alembic import op

from webplatform.store.models import UTCDateTime

revision, down_revision = "0006", "0005"


def upgrade() -> None:
    op.add_column("job", sa.Column("notified_at", UTCDateTime(), nullable=True))
    op.add_column("job", sa.Column("reminded_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column("job", "reminded_at")
    op.drop_column("job", "notified_at")
