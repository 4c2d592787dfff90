"""The consumed-decision ledger: one signed approval starts one run.

A signature proves the dashboard made a decision; it cannot say whether the decision was
used already. Whoever can write the database could move a finished (or lost) job back to
`approved`, and a worker would run it again under its old, valid signature. So before a
worker starts an approved job it records the decision in a file outside the database,
`AAT_HOME/decision-ledger` (owner-only, opened for appending, each record fsync'd before the
tool starts), and refuses a decision the file already holds. An exclusive `flock` on the file
makes "look, then record" one step for every worker on this host: of two workers holding the
same decision, one starts it. A record takes milliseconds, so a worker waits for the lock at
most `LOCK_WAIT_S`: a holder slower than that is stopped (SIGSTOP) or stuck on a failing disk.

A decision the ledger cannot record (the lock not had in time, a full disk) starts nothing
and spends nothing: the worker gives its job back to `approved`, the reason on the job's
page, and it starts once the ledger can record it (within the age below, like any other).

A decision is named by the sha256 of the exact bytes the dashboard signed (job id, call,
operators, time), so it cannot be renamed without breaking its signature.

Workers on other hosts keep ledgers of their own, which this one cannot see. What bounds a
replay there is the decision's age: one older than the approval window plus the lease time
(`AAT_APPROVAL_TTL_S + AAT_WORKER_LEASE_S`) is refused on every host. The age is read
against the database server's clock, which the decision's time was also taken from, so a
worker whose own clock is off by an hour starts nothing too old, and refuses nothing young.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from webplatform.config import Settings
from webplatform.trust.signing import Decision

LEDGER_FILE = "decision-ledger"
REUSED = "decision-reused"
TOO_OLD = "decision-too-old"
# Not a refusal: the decision could not be recorded, so its job waits (see above).
UNRECORDED = "decision-unrecorded"
# The audit events of a valid approval a worker refused to start, for good.
REFUSAL_EVENTS = frozenset({REUSED, TOO_OLD})
# How long a worker waits for another process's hold on the ledger's lock.
LOCK_WAIT_S = 5.0
# The name of a decision in a record, found even in a record a crash cut short.
_RECORDED = re.compile(rb'"decision": ?"([0-9a-f]{64})"(?:[^\n]*?"started_at": ?"([^"]*)")?')
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW


@dataclass(frozen=True)
class Refusal:
    """Why a verified decision may not start its job: the audit event and one line."""

    event: str
    problem: str

    @property
    def waits(self) -> bool:
        """True when nothing was spent and the job may start later (`UNRECORDED`)."""
        return self.event == UNRECORDED


class LedgerBusy(OSError):
    """Another process held the ledger's lock for longer than a record ever takes."""


def decision_digest(decision: Decision) -> str:
    """The name a decision is recorded under: sha256 of the bytes its signature covers."""
    return hashlib.sha256(decision.message()).hexdigest()


def max_age_s(settings: Settings) -> float:
    """How old a decision may be when its run starts: the approval window plus the lease."""
    return settings.approval_ttl_s + settings.worker_lease_s


class DecisionLedger:
    """The decisions this host's workers have started, in `AAT_HOME/decision-ledger`.

    Each instance remembers what it has read, and reads only what was appended since.
    """

    def __init__(self, path: Path, lock_wait_s: float = LOCK_WAIT_S) -> None:
        self.path = path
        self.lock_wait_s = lock_wait_s
        self._started: dict[str, str] = {}  # decision digest -> when its run started
        self._file: tuple[int, int] | None = None  # (device, inode) read so far
        self._read_to = 0

    def problem(self) -> str | None:
        """None when the ledger can be opened to record decisions; otherwise why not (one line,
        with the fix). A worker checks this before it claims anything."""
        try:
            with self._opened():
                return None
        except OSError as exc:
            return self._unusable(exc)

    def admit(
        self, decision: Decision, *, worker_id: str, max_age_s: float, now: datetime | None = None
    ) -> Refusal | None:
        """Record `decision` as started `now` and return None, or say why it may not start.

        Call it once the decision's signature has verified and before the tool starts: the
        record is on disk (fsync'd) when this returns None. `now` is the clock hosts share,
        the one the decision's time was taken from (None: this host's).
        """
        now = now or datetime.now(UTC)
        name = f"decision sha256:{decision_digest(decision)[:16]}"
        said = f"job {decision.job_id}'s approval ({name}, by {', '.join(decision.operators)} "
        said += f"at {_iso(decision.at)})"
        age = (now - decision.at).total_seconds()
        if age > max_age_s:
            return Refusal(
                TOO_OLD,
                f"{said} is {age:.0f} s old, older than the approval window plus the lease "
                f"time ({max_age_s:.0f} s, AAT_APPROVAL_TTL_S + AAT_WORKER_LEASE_S)",
            )
        try:
            started = self._record(decision, worker_id=worker_id, now=now)
        except OSError as exc:
            return Refusal(UNRECORDED, f"{said} could not be recorded: {self._unusable(exc)}")
        if started is not None:
            return Refusal(
                REUSED,
                f"{said} was already used to start a run at {started} (recorded in "
                f"{self.path}): a job moved back to approved never runs again",
            )
        return None

    def _record(self, decision: Decision, *, worker_id: str, now: datetime) -> str | None:
        """Append the decision unless it is there; when it is, when its run started."""
        digest = decision_digest(decision)
        with self._opened() as fd:
            _lock(fd, self.lock_wait_s)  # released when the file is closed
            self._catch_up(fd)
            if digest in self._started:
                return self._started[digest] or "an unrecorded time"
            started = _iso(now)
            record = {
                "decision": digest,
                "started_at": started,
                "job": decision.job_id,
                "decided_at": _iso(decision.at),
                "worker": worker_id,
            }
            line = json.dumps(record, separators=(", ", ": ")).encode("ascii") + b"\n"
            end = os.fstat(fd).st_size
            if end and os.pread(fd, 1, end - 1) != b"\n":
                line = b"\n" + line  # after a record a crash cut short
            try:
                _write_all(fd, line)
                os.fsync(fd)
            except OSError:
                _cut_back(fd, end)  # no part of a record that did not land stays to be read
                raise
            self._read_to = end + len(line)
            self._started[digest] = started
        return None

    def _catch_up(self, fd: int) -> None:
        """Read what other workers appended since this instance last looked."""
        info = os.fstat(fd)
        if self._file != (info.st_dev, info.st_ino) or info.st_size < self._read_to:
            self._file, self._read_to = (info.st_dev, info.st_ino), 0
        while self._read_to < info.st_size:
            chunk = os.pread(fd, min(info.st_size - self._read_to, 1 << 20), self._read_to)
            if not chunk:
                break
            # Whole lines only, unless the rest is a record a crash cut short.
            whole = chunk[: chunk.rfind(b"\n") + 1] or chunk
            for match in _RECORDED.finditer(whole):
                started = (match.group(2) or b"").decode("ascii", "replace")
                self._started.setdefault(match.group(1).decode("ascii"), started)
            self._read_to += len(whole)

    @contextmanager
    def _opened(self) -> Iterator[int]:
        """The ledger's descriptor, the file made owner-only if new; OSError when the file
        cannot be used (PermissionError when other users may read or change it)."""
        created = not self.path.exists()
        if created:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, _OPEN_FLAGS, 0o600)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) & 0o077:
                raise PermissionError(f"mode {stat.S_IMODE(info.st_mode):04o}")
            if created:
                _sync_folder(self.path.parent)  # the new file's name survives a crash too
            yield fd
        finally:
            os.close(fd)

    def _unusable(self, exc: OSError) -> str:
        if isinstance(exc, LedgerBusy):
            return f"the decision ledger {self.path} is busy: {exc}"
        if isinstance(exc, PermissionError) and str(exc).startswith("mode "):
            return (
                f"the decision ledger {self.path} can be read or changed by other users "
                f"({exc}); run `chmod 600 {self.path}` and start again"
            )
        return (
            f"the decision ledger {self.path} cannot be written ({exc.strerror or exc}); "
            "give aat's OS user a writable AAT_HOME with free space"
        )


def ledger_for(settings: Settings) -> DecisionLedger:
    """The ledger of this host: `AAT_HOME/decision-ledger`."""
    return DecisionLedger(settings.home / LEDGER_FILE)


def _lock(fd: int, wait_s: float) -> None:
    """Take the ledger's exclusive lock, waiting at most `wait_s`; LedgerBusy when not had."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                why = f"another process has held its lock for over {wait_s:g} s (a stopped worker?)"
                raise LedgerBusy(why) from None
            time.sleep(0.01)


def _cut_back(fd: int, end: int) -> None:
    """Truncate the ledger to `end`, where it ended before a record that failed to land."""
    # Where this fails too, the record's start, if any landed, counts as started: the safe side.
    with contextlib.suppress(OSError):
        os.ftruncate(fd, end)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
