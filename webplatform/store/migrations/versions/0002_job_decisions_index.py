"""Index for the approvals page's decision history (irreversible jobs, newest change first).

Without it the history under the live queue scans and sorts the whole job table on every
poll; at 100,000 jobs that is most of the page's time.
"""

from alembic import op

revision, down_revision = "0002", "0001"


def upgrade() -> None:
    op.create_index("ix_job_irreversible_updated_at", "job", ["irreversible", "updated_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_job_irreversible_updated_at", table_name="job")
