"""Approval policy: operator roles, several approvers per job, and the agent's reason."""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0007", "0006"


def upgrade() -> None:
    # Operators that exist already could do everything: they stay admins.
    with op.batch_alter_table("operator") as batch:
        batch.add_column(
            sa.Column("role", sa.String(16), nullable=False, server_default="admin")
        )
    with op.batch_alter_table("job") as batch:
        batch.add_column(
            sa.Column("approvals_required", sa.Integer(), nullable=False, server_default="1")
        )
        batch.add_column(
            sa.Column("self_approval", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch.add_column(sa.Column("asked_by_operator", sa.String(64), nullable=True))
        batch.add_column(sa.Column("agent_reason", sa.Text(), nullable=True))
        # Several approvers' names, comma-separated.
        batch.alter_column("decided_by", type_=sa.Text(), existing_type=sa.String(200))
    op.create_table(
        "job_approval",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("operator", sa.String(64), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("step_up", sa.String(200), nullable=True),
        sa.Column("address", sa.String(200), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("job_id", "operator", name="uq_job_approval_job_operator"),
    )
    op.create_index("ix_job_approval_job_id", "job_approval", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_job_approval_job_id", table_name="job_approval")
    op.drop_table("job_approval")
    with op.batch_alter_table("job") as batch:
        batch.alter_column("decided_by", type_=sa.String(200), existing_type=sa.Text())
        batch.drop_column("agent_reason")
        batch.drop_column("asked_by_operator")
        batch.drop_column("self_approval")
        batch.drop_column("approvals_required")
    with op.batch_alter_table("operator") as batch:
        batch.drop_column("role")
