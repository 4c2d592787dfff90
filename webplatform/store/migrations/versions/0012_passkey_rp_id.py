"""Passkeys keep the relying party they were made for (`localhost`, or the dashboard's host)."""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0012", "0011"


def upgrade() -> None:
    op.add_column(
        "passkey",
        sa.Column("rp_id", sa.String(253), nullable=False, server_default="localhost"),
    )


def downgrade() -> None:
    op.drop_column("passkey", "rp_id")
