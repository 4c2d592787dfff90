"""A job allowed by a rule (SPEC §16) names it: `job.allowed_by_rule`."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0015", "0014"


def upgrade() -> None:
    op.add_column("job", sa.Column("allowed_by_rule", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("job", "allowed_by_rule")
