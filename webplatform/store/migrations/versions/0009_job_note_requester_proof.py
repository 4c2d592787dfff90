"""A job keeps why the caller's folder was not a workspace (`note`), and what vouched for the
requester (`requester_proof`: an agent token or an operator's login; none: self-reported).

Revision ID: 0009
Revises: 0008
Create Date: 2025-01-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("note", sa.Text(), nullable=True))
        batch.add_column(sa.Column("requester_proof", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.drop_column("requester_proof")
        batch.drop_column("note")
