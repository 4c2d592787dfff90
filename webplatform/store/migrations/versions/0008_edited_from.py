"""Edit then approve: a job remembers the pending job an operator edited into it.

Revision ID: 0008
Revises: 0007
Create Date: 2025-01-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("edited_from", sa.Integer(), nullable=True))
    # The agent waiting on an edited job finds its successor by this.
    op.create_index("ix_job_edited_from", "job", ["edited_from"])


def downgrade() -> None:
    op.drop_index("ix_job_edited_from", table_name="job")
    with op.batch_alter_table("job") as batch:
        batch.drop_column("edited_from")
