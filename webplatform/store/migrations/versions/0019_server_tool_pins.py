"""Pinned definitions of upstream MCP servers' tools (SPEC §22): `server_tool_pin`."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webplatform.store.models import UTCDateTime

revision, down_revision = "0019", "0018"


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("server_tool_pin"):
        return  # a database rebuilt from older revisions that kept this table
    op.create_table(
        "server_tool_pin",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("server", sa.String(200), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("definition_json", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("seen_at", UTCDateTime(), nullable=False),
        sa.Column("accepted_by", sa.String(64), nullable=True),
        sa.Column("accepted_at", UTCDateTime(), nullable=True),
        sa.UniqueConstraint("server", "tool", "digest"),
    )
    op.create_index("ix_server_tool_pin_server", "server_tool_pin", ["server"])


def downgrade() -> None:
    op.drop_index("ix_server_tool_pin_server", table_name="server_tool_pin")
    op.drop_table("server_tool_pin")
