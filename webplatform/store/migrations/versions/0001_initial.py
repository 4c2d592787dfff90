"""Initial schema: jobs, audit events, operators, sessions, heartbeats, meta."""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0001", None


def _ts(name: str, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    """Create every table and index, in the order this migration has always used."""
    _create_job()
    _create_audit_event_and_operators()
    _create_heartbeat_and_meta()


def _create_job() -> None:
    op.create_table(
        "job",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("action", sa.String(200), nullable=False),
        sa.Column("args_json", sa.Text(), nullable=False),
        sa.Column("args_digest", sa.String(64), nullable=False),
        sa.Column("irreversible", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("surface", sa.String(32), nullable=False),
        sa.Column("client", sa.String(200), nullable=True),
        sa.Column("requested_by", sa.String(200), nullable=True),
        _ts("created_at", nullable=False),
        _ts("updated_at", nullable=False),
        _ts("expires_at"),
        sa.Column("decided_by", sa.String(200), nullable=True),
        _ts("decided_at"),
        sa.Column("decided_from", sa.String(200), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("worker_id", sa.String(200), nullable=True),
        _ts("lease_expires_at"),
        _ts("started_at"),
        _ts("finished_at"),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("stdout", sa.Text(), nullable=True),
        sa.Column("stderr", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("rerun_of", sa.Integer(), nullable=True),
    )
    op.create_index("ix_job_state_created_at", "job", ["state", "created_at"])
    op.create_index("ix_job_state_id", "job", ["state", "id"])
    op.create_index("ix_job_name_id", "job", ["name", "id"])
    op.create_index("ix_job_surface_id", "job", ["surface", "id"])
    op.create_index("ix_job_created_at", "job", ["created_at"])


def _create_audit_event_and_operators() -> None:
    op.create_table(
        "audit_event",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Integer(), nullable=True),
        _ts("at", nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("event", sa.String(40), nullable=False),
        sa.Column("from_state", sa.String(32), nullable=True),
        sa.Column("to_state", sa.String(32), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("address", sa.String(200), nullable=True),
    )
    op.create_index("ix_audit_event_job_id", "audit_event", ["job_id"])

    op.create_table(
        "operator",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("password_hash", sa.String(255), nullable=False),
        _ts("created_at", nullable=False),
    )

    op.create_table(
        "operator_session",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("operator", sa.String(64), nullable=False),
        _ts("created_at", nullable=False),
        _ts("expires_at", nullable=False),
        _ts("last_seen_at", nullable=False),
    )
    op.create_index("ix_operator_session_operator", "operator_session", ["operator"])


def _create_heartbeat_and_meta() -> None:
    op.create_table(
        "heartbeat",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        _ts("seen_at", nullable=False),
    )
    op.create_index("ix_heartbeat_role_seen_at", "heartbeat", ["role", "seen_at"])

    op.create_table(
        "meta",
        sa.Column("key", sa.String(100), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("meta")
    op.drop_table("heartbeat")
    op.drop_table("operator_session")
    op.drop_table("operator")
    op.drop_table("audit_event")
    op.drop_table("job")
