"""Background duties, one module for every long-running process (`aat serve`, `aat worker`).

The duties: leave this process's heartbeat, close approval windows that ran out, mark jobs
whose worker stopped renewing its lease `lost`, run again the previews of waiting calls whose
own process ended first, hand new pending approvals (and those with a
fifth of their window left) to the `AAT_NOTIFY` sender, and (at the first pass, then every
`prune_every_s`) remove what nobody needs any more: finished jobs past retention, expired
operator sessions and heartbeats of processes long gone. Every duty is idempotent, so any
number of processes on any number of hosts can run it side by side.

Each duty runs when it falls due, not on a fixed beat: the housekeeper reads when the next
approval expires and the next lease ends, and sleeps until the first of those, the next
heartbeat or the next pruning. A job move (a new pending approval, a claim) wakes it early,
since it may bring a deadline closer; it comes from this process, another process on the
host (SQLite's marker file) or another host (PostgreSQL's NOTIFY). Each heartbeat pass reads
the deadlines again, so a wake-up lost with a crashed process or a broken LISTEN connection
delays a duty by at most `heartbeat_s`. Idle, with nothing pending or running, it wakes only
to beat. Deadlines are compared with the clock hosts share (`webplatform.store.clock`), never
this host's, so a host whose clock is off expires, reaps and prunes nothing early or late.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import Engine
from sqlmodel import Session

from webplatform import notifications
from webplatform.config import Settings
from webplatform.jobs import previews
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.store.notices import claim_new_pending, claim_reminders
from webplatform.store.notify import JobNotifications

log = logging.getLogger(__name__)

PRUNE_BATCH = 500
# A heartbeat unseen this long belongs to a process that is gone (a live one beats every
# few seconds); only its row is left, and nothing reads it any more.
STALE_HEARTBEAT_S = 3600.0
# A deadline is acted on this long after it falls (a lease is lost only once strictly past
# its end), so the wake-up never comes a hair too early and finds nothing to do.
LATE_S = 0.01
# The shortest sleep between passes: a deadline someone else should have met (a job another
# process is moving right now) is looked at again soon, never in a busy loop.
MIN_WAIT_S = 0.05

Role = Literal["dashboard", "worker"]


def run_passes(
    engine: Engine,
    stop: threading.Event,
    one_pass: Callable[[bool], float | None],
    on_move: Callable[[], None] | None = None,
    *,
    only_approved: bool = False,
) -> None:
    """Run `one_pass(listening)` until `stop` is set, sleeping between passes the seconds it
    returns (None: the next pass at once), woken early by any job move (with `only_approved`,
    by a move into `approved`) and then `on_move()`.

    `listening` says whether job moves wake this process at all (PostgreSQL's LISTEN/NOTIFY,
    SQLite's marker file); it is read before the pass, so a move during the pass counts.
    """
    wakeups = JobNotifications(engine, only_approved=only_approved)
    try:
        while not stop.is_set():
            wait_s = one_pass(wakeups.listening)
            if wait_s is None:
                continue
            if wakeups.wait(max(0.0, wait_s), stop) and on_move is not None:
                on_move()
    finally:
        wakeups.close()


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
    """The background duties of one process, identified by `process_id` in role `role`.

    `also_beats_for`: other (process id, role) pairs of this process whose heartbeat it
    leaves too (`aat serve` beats for its embedded worker in the same transaction).
    """

    # Pruning runs at the first pass and then this often (seconds): old rows are not urgent,
    # and every process on every host does it.
    prune_every_s: float = 300.0

    def __init__(
        self,
        *,
        platform: Platform,
        settings: Settings,
        process_id: str,
        role: Role,
        also_beats_for: Sequence[tuple[str, Role]] = (),
    ) -> None:
        self.platform = platform
        self.settings = settings
        self.process_id = process_id
        self.role = role
        self._beats = ((process_id, role), *also_beats_for)
        self._next_beat = float("-inf")
        self._last_prune = float("-inf")
        self._sender: notifications.Sender | None = None
        if settings.notify_urls:
            try:
                self._sender = notifications.sender_for(settings.notify_urls)
            except ValueError as exc:
                log.error("housekeeping: no notifications: %s", exc)

    def run_once(self) -> Chores:
        """Every duty now: heartbeat, expiry, lost leases, notifications, and pruning when due."""
        self.beat()
        expired, lost = self._expire(), self._reap()
        notified = self.notify()
        if time.monotonic() - self._last_prune < self.prune_every_s:
            return Chores(expired=expired, lost=lost, notified=notified)
        finished, sessions, heartbeats = self.prune()
        return Chores(expired, lost, finished, sessions, heartbeats, notified)

    def run_due(self) -> float:
        """Do the duties that are due now, and only those; seconds until the next falls due
        (0 when this pass moved jobs: the next look sees where that left the deadlines).

        The deadlines cost one short read; nothing is written unless something is due.
        """
        if time.monotonic() >= self._next_beat:
            self.beat()
        if time.monotonic() - self._last_prune >= self.prune_every_s:
            self.prune()
        due = self.platform.jobs.next_deadlines()
        now = due.now  # the clock the deadlines were written with, not this host's
        notice = self._notice_due(now)
        moved = 0
        if due.expiry is not None and due.expiry <= now:
            moved += self._expire()
        if due.lease_end is not None and due.lease_end < now:
            moved += self._reap()
        if notice is not None and notice <= now:
            moved += self.notify()
        if moved:
            return 0.0
        return self._wait_s(now, (due.expiry, due.lease_end, notice))

    def _wait_s(self, now: datetime, deadlines: Sequence[datetime | None]) -> float:
        """Seconds from `now` until the next heartbeat, pruning or one of `deadlines`."""
        clock = time.monotonic()
        waits = [self._next_beat - clock, self._last_prune + self.prune_every_s - clock]
        waits += [(d - now).total_seconds() + LATE_S for d in deadlines if d is not None]
        return max(MIN_WAIT_S, min(waits))

    def beat(self) -> None:
        """Leave the heartbeat of every process this housekeeper speaks for, in one
        transaction; the next is due `heartbeat_s` later."""
        host, pid, beats = socket.gethostname(), os.getpid(), self._beats
        self.platform.heartbeats.beat_all(beats, host, pid)
        self._next_beat = time.monotonic() + self.settings.heartbeat_s
        self.rerun_previews()

    def rerun_previews(self) -> int:
        """Run again the previews whose own process ended before they did (at each
        heartbeat: a card waits at most that long for a real one); how many."""
        rerun = previews.rerun_orphans(self.platform)
        if rerun:
            log.info("housekeeping: %d preview(s) run again, their process gone", rerun)
        return rerun

    def _expire(self) -> int:
        expired = self.platform.jobs.step(jobs.expire_due)
        if expired:
            log.info("housekeeping: %d approval(s) expired", expired)
        return expired

    def _reap(self) -> int:
        lost = self.platform.leases.reap_lost()
        if lost:
            log.info("housekeeping: %d job(s) lost", lost)
        return lost

    def _notice_due(self, now: datetime) -> datetime | None:
        """When AAT_NOTIFY is next owed a notice; None without a sender or with none owed."""
        if self._sender is None:
            return None
        return self.platform.jobs.next_notice_due(now)

    def notify(self) -> int:
        """Claim the pending jobs AAT_NOTIFY has not heard of (or must be reminded of) and
        queue their notices; how many. Sending happens on the sender's thread, never here."""
        sender = self._sender
        if sender is None:
            return 0
        now = self.platform.jobs.now()
        settings = self.settings

        def claim(session: Session) -> list[notifications.Notice]:
            fresh = claim_new_pending(session=session, now=now)
            due = claim_reminders(session=session, now=now)
            return [notifications.new_pending_notice(job=j, settings=settings) for j in fresh] + [
                notifications.reminder_notice(job=j, settings=settings, now=now) for j in due
            ]

        notices = self.platform.jobs.step(claim)
        for notice in notices:
            sender.post(notice)
        return len(notices)

    def prune(self) -> tuple[int, int, int]:
        """Remove finished jobs past AAT_RETENTION_DAYS (one short transaction per batch),
        expired operator sessions and stale heartbeats; how many of each.

        Pending, approved and running jobs, and decision audit events, are never removed.
        """
        self._last_prune = time.monotonic()
        now = self.platform.jobs.now()
        cutoff = now - timedelta(days=self.settings.retention_days)
        finished = 0
        while True:
            batch = self.platform.jobs.prune_finished(cutoff, PRUNE_BATCH)
            finished += batch
            if batch < PRUNE_BATCH:
                break
        sessions = self.platform.jobs.prune_sessions()
        self.platform.jobs.prune_sign_ins()  # sign-in leftovers
        stale = now - timedelta(seconds=STALE_HEARTBEAT_S)
        heartbeats = self.platform.heartbeats.prune(stale)
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
        """Do each duty when it falls due until `stop` is set; then the heartbeats are removed.

        Between passes it sleeps until the next deadline, woken early by any job move, and
        by `stop` when that is a `StopEvent`. Where no job move can wake it (no inotify, no
        LISTEN connection) it looks every `heartbeat_s`. A failed pass (a locked or briefly
        unreachable database) is logged and retried `heartbeat_s` later.
        """

        def one_pass(listening: bool) -> float:
            try:
                wait_s = self.run_due()
            except Exception:
                log.exception("housekeeping (%s) failed; retrying", self.role)
                wait_s = self.settings.heartbeat_s
            return wait_s if listening else min(wait_s, self.settings.heartbeat_s)

        run_passes(self.platform.engine, stop, one_pass)
        self.forget()

    def forget(self) -> None:
        """Remove the heartbeats this housekeeper left (its process is stopping)."""
        gone = [process_id for process_id, _role in self._beats]
        try:
            self.platform.heartbeats.forget(gone)
        except Exception:
            log.warning("%s %s: could not remove its heartbeat", self.role, self.process_id)
