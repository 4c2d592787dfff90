"""Passkeys keep the relying party they were made for (`localhost`, or the dashboard's host).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "passkey",
        sa.Column("rp_id", sa.String(253), nullable=False, server_default="localhost"),
    )


def downgrade() -> None:
    op.drop_column("passkey", "rp_id")
