"""The audit trail as one aggregate, `platform.audit`: recorded, exported, verified."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from webplatform.store import audit_chain, job_trail, seals
from webplatform.store.audit import AuditEntry, record_event, trace_of
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

    def rows_after(self, after_id: int, since: datetime | None) -> list[dict[str, Any]]:
        """The events after event `after_id` (from `since` on), a page (`aat audit tail`)."""
        return self._read(
            lambda s: audit_chain.rows_after(session=s, after_id=after_id, since=since)
        )

    def id_before_last(self, count: int) -> int:
        """The id after which the trail's last `count` events start."""
        return self._read(lambda s: audit_chain.id_before_last(session=s, count=count))

    def trace_of(self, job_id: int) -> tuple[str, str] | None:
        """The span of the call that asked for job `job_id`, as its events recorded it."""
        return self._read(lambda s: trace_of(session=s, job_id=job_id))

    def verify(self) -> tuple[audit_chain.ChainReport, list[str]]:
        """The chain's check, and the jobs whose trail disagrees with their row, in one
        read (`aat audit verify`)."""
        return self._read(
            lambda s: (
                audit_chain.verify_chain(session=s),
                list(job_trail.jobs_out_of_step(session=s)),
            )
        )
