"""The effect approved is the effect run (SPEC §20): a preview's digest (`job_preview.digest`)
and when a re-run before the run found it changed (`job_preview.changed_at`), and the digest
an approval was signed over (`job.preview_digest`). Existing previews get their digest here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webplatform.store.models import UTCDateTime
from webplatform.store.previews import preview_digest

revision, down_revision = "0018", "0017"


def upgrade() -> None:
    with op.batch_alter_table("job_preview") as batch:
        batch.add_column(sa.Column("digest", sa.String(64), nullable=True))
        batch.add_column(sa.Column("changed_at", UTCDateTime(), nullable=True))
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("preview_digest", sa.String(64), nullable=True))
    previews = sa.table(
        "job_preview",
        sa.column("job_id", sa.Integer()),
        sa.column("action", sa.String()),
        sa.column("state", sa.String()),
        sa.column("output", sa.Text()),
        sa.column("error", sa.Text()),
        sa.column("truncated", sa.Boolean()),
        sa.column("digest", sa.String()),
    )
    bind = op.get_bind()
    rows = bind.execute(sa.select(previews).where(previews.c.digest.is_(None))).all()
    for row in rows:
        digest = preview_digest(
            action=row.action,
            state=row.state,
            output=row.output,
            error=row.error,
            truncated=bool(row.truncated),
        )
        bind.execute(
            previews.update().where(previews.c.job_id == row.job_id).values(digest=digest)
        )


def downgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.drop_column("preview_digest")
    with op.batch_alter_table("job_preview") as batch:
        batch.drop_column("changed_at")
        batch.drop_column("digest")
