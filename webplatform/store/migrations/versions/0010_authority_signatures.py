"""Signed authority rows: operators, passkeys, agent tokens and sessions carry aat's signature.

Rows from before this revision have none; `aat serve` or the command line signs them once
(`webplatform.trust.authority.adopt_unsigned`), and ends the unsigned sessions.
"""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0010", "0009"

TABLES = ("operator", "passkey", "agent_token", "operator_session")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("signature", sa.String(200), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("signature")
