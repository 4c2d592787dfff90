"""Rules decided in advance (SPEC §16): the `rule` table."""

import sqlalchemy as sa
from alembic import op

from webplatform.store.models import UTCDateTime

revision, down_revision = "0013", "0012"


def upgrade() -> None:
    op.create_table(
        "rule",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("effect", sa.String(8), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False, index=True),
        sa.Column("action", sa.String(200), nullable=True),
        sa.Column("requester", sa.String(64), nullable=True),
        sa.Column("args_json", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("cedar", sa.Text(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.Column("max_runs", sa.Integer(), nullable=True),
        sa.Column("runs", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("note", sa.String(500), nullable=False, server_default=""),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.Column("revoked_by", sa.String(64), nullable=True),
        sa.Column("signature", sa.String(200), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("rule")
