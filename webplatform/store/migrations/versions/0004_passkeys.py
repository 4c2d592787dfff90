"""Passkeys (WebAuthn credentials: public keys only) and their single-use challenges."""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0004", "0003"


def _ts(name: str, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "passkey",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("operator", sa.String(64), nullable=False),
        sa.Column("credential_id", sa.String(1400), nullable=False, unique=True),
        sa.Column("public_key", sa.Text(), nullable=False),
        sa.Column("sign_count", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(100), nullable=False),
        _ts("created_at", nullable=False),
        _ts("last_used_at"),
    )
    op.create_index("ix_passkey_operator", "passkey", ["operator"])
    op.create_table(
        "webauthn_challenge",
        sa.Column("challenge", sa.String(128), primary_key=True),
        sa.Column("operator", sa.String(64), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("digest", sa.String(64), nullable=True),
        _ts("expires_at", nullable=False),
    )
    op.create_index("ix_webauthn_challenge_expires_at", "webauthn_challenge", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_webauthn_challenge_expires_at", table_name="webauthn_challenge")
    op.drop_table("webauthn_challenge")
    op.drop_index("ix_passkey_operator", table_name="passkey")
    op.drop_table("passkey")
