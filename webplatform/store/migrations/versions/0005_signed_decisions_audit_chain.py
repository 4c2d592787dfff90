"""Signed decisions and the audit hash chain.

`job.decision_signature` holds the dashboard's Ed25519 signature over a decision;
`audit_event.prev_hash` / `event_hash` link every event to the one before it. Events that
exist already are chained here, oldest first. Jobs approved before this upgrade carry no
signature, so a worker refuses them (they end failed); ask for them again.
"""

import sqlalchemy as sa
from alembic import op

from webplatform.store.audit_chain import GENESIS, AuditEntry, content_hash
from webplatform.store.models import UTCDateTime

revision, down_revision = "0005", "0004"

_EVENTS = sa.table(
    "audit_event",
    sa.column("id", sa.Integer()),
    sa.column("job_id", sa.Integer()),
    sa.column("at", UTCDateTime()),
    sa.column("actor", sa.String()),
    sa.column("event", sa.String()),
    sa.column("from_state", sa.String()),
    sa.column("to_state", sa.String()),
    sa.column("detail", sa.Text()),
    sa.column("address", sa.String()),
    sa.column("prev_hash", sa.String()),
    sa.column("event_hash", sa.String()),
)


def upgrade() -> None:
    op.add_column("job", sa.Column("decision_signature", sa.String(200), nullable=True))
    op.add_column("audit_event", sa.Column("prev_hash", sa.String(64), nullable=True))
    op.add_column("audit_event", sa.Column("event_hash", sa.String(64), nullable=True))
    conn = op.get_bind()
    rows = conn.execute(sa.select(_EVENTS).order_by(_EVENTS.c.id)).mappings().all()
    prev = GENESIS
    for row in rows:
        own = content_hash(prev, AuditEntry.of(row), row["at"])
        conn.execute(
            _EVENTS.update()
            .where(_EVENTS.c.id == row["id"])
            .values(prev_hash=prev, event_hash=own)
        )
        prev = own


def downgrade() -> None:
    op.drop_column("audit_event", "event_hash")
    op.drop_column("audit_event", "prev_hash")
    op.drop_column("job", "decision_signature")
