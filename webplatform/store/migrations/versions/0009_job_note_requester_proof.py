"""A job keeps why the caller's folder was not a workspace (`note`), and what vouched for the
requester (`requester_proof`: an agent token or an operator's login; none: self-reported).
"""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0009", "0008"


def upgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("note", sa.Text(), nullable=True))
        batch.add_column(sa.Column("requester_proof", sa.String(16), nullable=True))
    # Jobs made before: the dashboard always had an operator signed in; over HTTP, a
    # requester named otherwise than its client was an agent token's. Anything else stays
    # unvouched for, and is shown as self-reported.
    op.execute("UPDATE job SET requester_proof = 'login' WHERE surface = 'dashboard'")
    op.execute(
        "UPDATE job SET requester_proof = 'token' WHERE surface = 'mcp-http' "
        "AND requested_by IS NOT NULL AND (client IS NULL OR requested_by <> client)"
    )


def downgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.drop_column("requester_proof")
        batch.drop_column("note")
