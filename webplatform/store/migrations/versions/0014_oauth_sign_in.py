"""Agents that sign in through the browser (SPEC §18): registered clients, authorization
grants with their codes, refresh tokens; an agent token's expiry and resource.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("agent_token", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("agent_token", sa.Column("resource", sa.String(2000), nullable=True))
    op.create_table(
        "oauth_client",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("client_id", sa.String(64), nullable=False, unique=True),
        sa.Column("info", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "oauth_grant",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("request_id", sa.String(64), nullable=False, unique=True),
        sa.Column("client_id", sa.String(2000), nullable=False),
        sa.Column("client_name", sa.String(200), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("code_hash", sa.String(64), nullable=True, unique=True),
        sa.Column("agent", sa.String(64), nullable=True),
        sa.Column("owner", sa.String(64), nullable=True),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("signature", sa.String(200), nullable=True),
    )
    op.create_table(
        "oauth_refresh_token",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("agent", sa.String(64), nullable=False, index=True),
        sa.Column("client_id", sa.String(2000), nullable=False),
        sa.Column("resource", sa.String(2000), nullable=False),
        sa.Column("scopes", sa.String(1000), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rotated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("signature", sa.String(200), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("oauth_refresh_token")
    op.drop_table("oauth_grant")
    op.drop_table("oauth_client")
    with op.batch_alter_table("agent_token") as batch:
        batch.drop_column("resource")
        batch.drop_column("expires_at")
