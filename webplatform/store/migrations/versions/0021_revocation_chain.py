"""Revocations every host sees (SPEC §24): the `revocation` hash chain."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webplatform.store.models import UTCDateTime

revision, down_revision = "0021", "0020"


def upgrade() -> None:
    op.create_table(
        "revocation",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("revocation")
