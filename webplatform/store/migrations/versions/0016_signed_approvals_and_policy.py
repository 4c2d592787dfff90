"""Signed co-approvals and job policies (SPEC §19): `job_approval.signature` and
`job.policy_signature`, empty; rows already there are signed once by the first process that
holds the key afterwards (`webplatform.trust.authority.adopt_unsigned_approvals`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0016", "0015"


def upgrade() -> None:
    op.add_column("job_approval", sa.Column("signature", sa.String(200), nullable=True))
    op.add_column("job", sa.Column("policy_signature", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.drop_column("policy_signature")
    with op.batch_alter_table("job_approval") as batch:
        batch.drop_column("signature")
