"""When an operator's role change was signed (SPEC §19): `operator.signed_at`, signed with
the row, so a role set back to an earlier value is never the row aat revoked.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webplatform.store.models import UTCDateTime

revision, down_revision = "0017", "0016"


def upgrade() -> None:
    with op.batch_alter_table("operator") as batch:
        batch.add_column(sa.Column("signed_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("operator") as batch:
        batch.drop_column("signed_at")
