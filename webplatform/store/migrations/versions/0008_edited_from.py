"""Edit then approve: a job remembers the pending job an operator edited into it."""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0008", "0007"


def upgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("edited_from", sa.Integer(), nullable=True))
    # The agent waiting on an edited job finds its successor by this.
    op.create_index("ix_job_edited_from", "job", ["edited_from"])


def downgrade() -> None:
    op.drop_index("ix_job_edited_from", table_name="job")
    with op.batch_alter_table("job") as batch:
        batch.drop_column("edited_from")
