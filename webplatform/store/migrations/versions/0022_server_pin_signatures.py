"""Accepted server tool definitions are signed (SPEC §22): `server_tool_pin.signature`.

Definitions accepted before this revision carry none and are held again: an admin accepts
them once more (`aat servers accept NAME`), since a row alone cannot say who accepted it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0022", "0021"


def upgrade() -> None:
    with op.batch_alter_table("server_tool_pin") as batch:
        batch.add_column(sa.Column("signature", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("server_tool_pin") as batch:
        batch.drop_column("signature")
