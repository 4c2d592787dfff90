"""The audit trail as one aggregate, `platform.audit`: recorded, exported, verified."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from webplatform.store import audit_chain, job_trail, seals
from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.door import Aggregate
from webplatform.store.seals import Forged


class Audit(Aggregate):
    """The audit trail, as `platform.audit`: each method one transaction."""

    def record(self, entry: AuditEntry) -> None:
        """Append `entry` to the trail."""
        self._write(lambda s: record_event(s, entry))

    def record_forged(self, forged: list[Forged]) -> None:
        """Write each forged row noticed to the trail, once (`seals.record_forged`)."""
        self._write(lambda s: seals.record_forged(session=s, forged=forged))

    def export(self, since: datetime | None) -> list[dict[str, Any]]:
        """The trail's rows from `since` on, as `aat audit export` writes them."""
        return self._read(lambda s: list(audit_chain.export_rows(session=s, since=since)))

    def verify(self) -> tuple[audit_chain.ChainReport, list[str]]:
        """The chain's check, and the jobs whose trail disagrees with their row, in one
        read (`aat audit verify`)."""
        return self._read(
            lambda s: (
                audit_chain.verify_chain(session=s),
                list(job_trail.jobs_out_of_step(session=s)),
            )
        )
