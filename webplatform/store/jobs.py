"""The jobs as aggregates: `platform.jobs` (reads, previews, retention, notices),
`platform.leases` (a worker's claims) and `platform.heartbeats`.

Each method is one transaction through the platform's door. A job's state moves only where
`webplatform.jobs.states` (and a worker's `webplatform.jobs.leases`) decides it; those steps
run here through `step`, one transaction each, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlmodel import Session

from webplatform.store import leases, previews, queries
from webplatform.store.approvals import approvals_of
from webplatform.store.clock import shared_now
from webplatform.store.deadlines import Deadlines, next_deadlines
from webplatform.store.door import Aggregate
from webplatform.store.gauges import jobs_by_state
from webplatform.store.heartbeats import beat_all, forget_heartbeat, prune_heartbeats
from webplatform.store.models import Job, JobApproval, Surface
from webplatform.store.notices import next_notice_due
from webplatform.store.oauth import prune_expired
from webplatform.store.sessions import prune_sessions


class Jobs(Aggregate):
    """The job rows and what hangs off them, as `platform.jobs`."""

    def get(self, job_id: int) -> Job | None:
        """The whole job row, or None (`queries.get_job`)."""
        return self._read(lambda s: queries.get_job(session=s, job_id=job_id))

    def current(self, job_id: int) -> Job | None:
        """The job that now stands for `job_id` (itself, or the job it was edited into)."""
        return self._read(lambda s: queries.current_job(session=s, job_id=job_id))

    def edited_into(self, job_id: int) -> Job | None:
        """The job an operator edited job `job_id` into, or None."""
        return self._read(lambda s: queries.edited_into(session=s, job_id=job_id))

    def history(
        self, which: queries.HistoryFilter, *, before_id: int | None, limit: int
    ) -> list[Job]:
        """One page of the decided and finished jobs (`queries.list_jobs`)."""
        return self._read(
            lambda s: queries.list_jobs(session=s, which=which, before_id=before_id, limit=limit)
        )

    def get_many(self, job_ids: Sequence[int]) -> list[Job]:
        """The job rows of `job_ids` that exist, in one read."""

        def read(session: Session) -> list[Job]:
            found = (queries.get_job(session=session, job_id=i) for i in job_ids)
            return [job for job in found if job is not None]

        return self._read(read)

    def newest_pending_id(self) -> int:
        """The id of the newest job waiting for an operator (0: none)."""
        return self._read(lambda s: queries.newest_pending_id(session=s))

    def by_state(self) -> dict[str, int]:
        """How many jobs the database holds in each state (`/metrics`)."""
        return self._read(lambda s: jobs_by_state(session=s))

    def count_pending(self) -> int:
        """How many jobs wait for an operator."""
        return self._read(lambda s: queries.count_pending(session=s))

    def pending_approvals(self, limit: int) -> list[Job]:
        """The jobs waiting for an operator, oldest first, at most `limit`."""
        return self._read(lambda s: queries.pending_approvals(session=s, limit=limit))

    def pending_from(self, surface: Surface, client: str | None, agent: str | None) -> list[Job]:
        """The jobs one requester has waiting (`queries.pending_from_client`)."""
        return self._read(
            lambda s: queries.pending_from_client(
                session=s, surface=surface, client=client, agent=agent
            )
        )

    def recent_from(
        self, surface: Surface, client: str | None, agent: str | None, limit: int
    ) -> list[Job]:
        """One requester's newest jobs, newest first (`queries.recent_from_requester`)."""
        return self._read(
            lambda s: queries.recent_from_requester(
                session=s, surface=surface, client=client, agent=agent, limit=limit
            )
        )

    def approvals_of(self, job_id: int) -> list[JobApproval]:
        """The co-approval rows of job `job_id`, signed or not (the caller verifies)."""
        return self._read(lambda s: approvals_of(session=s, job_id=job_id))

    def finish_preview(self, job_id: int, done: previews.Finished) -> bool:
        """Record the preview of job `job_id` as `done` (`previews.finish`)."""
        return self._write(lambda s: previews.finish(session=s, job_id=job_id, done=done))

    def claim_orphan_previews(self, stopped_error: str, stale_before: datetime) -> list[int]:
        """Take the previews whose process ended before they did, to run again here
        (`previews.claim_orphans`); their jobs' ids."""
        return self._write(
            lambda s: previews.claim_orphans(
                session=s, stopped_error=stopped_error, stale_before=stale_before
            )
        )

    def now(self) -> datetime:
        """Now as every host sharing the database sees it (`webplatform.store.clock`)."""
        return self._read(shared_now)

    def next_deadlines(self) -> Deadlines:
        """The earliest approval expiry and lease end (one short read)."""
        return self._read(lambda s: next_deadlines(session=s))

    def next_notice_due(self, now: datetime) -> datetime | None:
        """When a notice to operators is next owed, or None."""
        return self._read(lambda s: next_notice_due(session=s, now=now))

    def prune_finished(self, older_than: datetime, batch: int) -> int:
        """One batch of finished jobs past retention removed (`queries.prune_finished`)."""
        return self._write(
            lambda s: queries.prune_finished(
                session=s, older_than=older_than, batch=batch, max_batches=1
            )
        )

    def prune_sessions(self) -> int:
        """Expired operator sessions removed; how many."""
        return self._write(lambda s: prune_sessions(session=s))

    def prune_sign_ins(self) -> int:
        """Expired sign-in grants, codes and refresh tokens removed; how many."""
        return self._write(lambda s: prune_expired(session=s))


class Leases(Aggregate):
    """A worker's claims on approved jobs, as `platform.leases` (`store.leases`)."""

    def approved_waiting(self) -> bool:
        """True when some approved job waits for a worker (a read, no lock)."""
        return self._read(lambda s: leases.approved_waiting(session=s))

    def claim_next(self, worker_id: str, lease_s: float) -> Job | None:
        """Take the oldest approved job for `worker_id`, or None."""
        return self._write(
            lambda s: leases.claim_next(session=s, worker_id=worker_id, lease_s=lease_s)
        )

    def hand_back(self, job_id: int, worker_id: str, why: str) -> Job:
        """Give job `job_id`, claimed by `worker_id` and not started, back to `approved`."""
        return self._write(
            lambda s: leases.hand_back(session=s, job_id=job_id, worker_id=worker_id, why=why)
        )

    def renew(self, job_id: int, worker_id: str, lease_s: float) -> bool:
        """Extend job `job_id`'s lease; False when it no longer runs on `worker_id`."""
        return self._write(
            lambda s: leases.renew_lease(
                session=s, job_id=job_id, worker_id=worker_id, lease_s=lease_s
            )
        )

    def reap_lost(self) -> int:
        """Running jobs whose lease ran out marked `lost`; how many."""
        return self._write(lambda s: leases.reap_lost(session=s))


class Heartbeats(Aggregate):
    """The heartbeats long-running processes leave, as `platform.heartbeats`."""

    def beat_all(self, beats: Sequence[tuple[str, str]], host: str, pid: int) -> None:
        """Leave one heartbeat per (process id, role) in `beats`."""
        self._write(lambda s: beat_all(session=s, beats=beats, host=host, pid=pid))

    def forget(self, process_ids: Sequence[str]) -> None:
        """Remove the heartbeats of `process_ids` (their processes are stopping), together."""

        def forget_all(session: Session) -> None:
            for process_id in process_ids:
                forget_heartbeat(session=session, process_id=process_id)

        self._write(forget_all)

    def prune(self, older_than: datetime) -> int:
        """Heartbeats older than `older_than` removed; how many."""
        return self._write(lambda s: prune_heartbeats(session=s, older_than=older_than))
