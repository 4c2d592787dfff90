"""Background duties, one module for every long-running process (`aat serve`, `aat worker`).

Each pass leaves this process's heartbeat, closes approval windows that ran out, marks jobs
whose worker stopped renewing its lease `lost`, hands new pending approvals (and those with a
fifth of their window left) to the `AAT_NOTIFY` sender, and (at the first pass, then every
`prune_every_s`) removes what nobody needs any more: finished jobs past retention, expired
operator sessions and heartbeats of processes long gone. Every duty is idempotent, so any
number of processes on any number of hosts can run it side by side.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from sqlalchemy import Engine
from sqlmodel import Session

from webplatform import jobs, leases, notifications
from webplatform.config import Settings
from webplatform.store.engine import transact
from webplatform.store.heartbeats import prune_heartbeats
from webplatform.store.models import utcnow
from webplatform.store.notices import claim_new_pending, claim_reminders
from webplatform.store.sessions import prune_sessions

log = logging.getLogger(__name__)

PRUNE_BATCH = 500
# A heartbeat unseen this long belongs to a process that is gone (a live one beats every
# few seconds); only its row is left, and nothing reads it any more.
STALE_HEARTBEAT_S = 3600.0

Role = Literal["dashboard", "worker"]


@dataclass(frozen=True)
class Chores:
    """What one housekeeping pass did (counts of rows moved or removed)."""

    expired: int = 0
    lost: int = 0
    finished_pruned: int = 0
    sessions_pruned: int = 0
    heartbeats_pruned: int = 0
    notified: int = 0


class Housekeeper:
    """The background duties of one process, identified by `process_id` in role `role`."""

    # Pruning runs at the first pass and then this often (seconds): old rows are not urgent,
    # and every process on every host does it.
    prune_every_s: float = 300.0

    def __init__(self, *, engine: Engine, settings: Settings, process_id: str, role: Role) -> None:
        self.engine = engine
        self.settings = settings
        self.process_id = process_id
        self.role = role
        self._last_prune = float("-inf")
        self._sender: notifications.Sender | None = None
        if settings.notify_urls:
            try:
                self._sender = notifications.sender_for(settings.notify_urls)
            except ValueError as exc:
                log.error("housekeeping: no notifications: %s", exc)

    def run_once(self) -> Chores:
        """One pass: heartbeat, expiry, lost leases, notifications, and pruning when due."""
        host, pid = socket.gethostname(), os.getpid()
        transact(
            self.engine,
            lambda s: jobs.beat(
                session=s, process_id=self.process_id, role=self.role, host=host, pid=pid
            ),
        )
        expired = transact(self.engine, lambda s: jobs.expire_due(session=s))
        lost = transact(self.engine, lambda s: leases.reap_lost(session=s))
        if expired or lost:
            log.info("housekeeping: %d approval(s) expired, %d job(s) lost", expired, lost)
        notified = self.notify()
        if time.monotonic() - self._last_prune < self.prune_every_s:
            return Chores(expired=expired, lost=lost, notified=notified)
        finished, sessions, heartbeats = self.prune()
        return Chores(expired, lost, finished, sessions, heartbeats, notified)

    def notify(self) -> int:
        """Claim the pending jobs AAT_NOTIFY has not heard of (or must be reminded of) and
        queue their notices; how many. Sending happens on the sender's thread, never here."""
        sender = self._sender
        if sender is None:
            return 0
        now = utcnow()
        settings = self.settings

        def claim(session: Session) -> list[notifications.Notice]:
            fresh = claim_new_pending(session=session, now=now)
            due = claim_reminders(session=session, now=now)
            return [notifications.new_pending_notice(job=j, settings=settings) for j in fresh] + [
                notifications.reminder_notice(job=j, settings=settings, now=now) for j in due
            ]

        notices = transact(self.engine, claim)
        for notice in notices:
            sender.post(notice)
        return len(notices)

    def prune(self) -> tuple[int, int, int]:
        """Remove finished jobs past AAT_RETENTION_DAYS (one short transaction per batch),
        expired operator sessions and stale heartbeats; how many of each.

        Pending, approved and running jobs, and decision audit events, are never removed.
        """
        self._last_prune = time.monotonic()
        cutoff = utcnow() - timedelta(days=self.settings.retention_days)
        finished = 0
        while True:
            batch = transact(
                self.engine,
                lambda s: jobs.prune_finished(
                    session=s, older_than=cutoff, batch=PRUNE_BATCH, max_batches=1
                ),
            )
            finished += batch
            if batch < PRUNE_BATCH:
                break
        sessions = transact(self.engine, lambda s: prune_sessions(session=s))
        stale = utcnow() - timedelta(seconds=STALE_HEARTBEAT_S)
        heartbeats = transact(self.engine, lambda s: prune_heartbeats(session=s, older_than=stale))
        if finished or sessions or heartbeats:
            log.info(
                "housekeeping: removed %d finished job(s) past retention, %d expired "
                "session(s), %d stale heartbeat(s)",
                finished,
                sessions,
                heartbeats,
            )
        return finished, sessions, heartbeats

    def run_forever(self, stop: threading.Event) -> None:
        """A pass every `heartbeat_s` until `stop` is set; then the heartbeat is removed.

        A failed pass (a locked or briefly unreachable database) is logged and retried.
        """
        while True:
            try:
                self.run_once()
            except Exception:
                log.exception("housekeeping (%s) failed; retrying", self.role)
            if stop.wait(self.settings.heartbeat_s):
                break
        self.forget()

    def forget(self) -> None:
        """Remove this process's heartbeat (it is stopping)."""
        try:
            transact(
                self.engine, lambda s: jobs.forget_heartbeat(session=s, process_id=self.process_id)
            )
        except Exception:
            log.warning("%s %s: could not remove its heartbeat", self.role, self.process_id)
