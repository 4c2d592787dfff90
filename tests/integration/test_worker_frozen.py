"""A worker frozen (SIGSTOP) past its lease and then resumed runs nothing twice (SPEC §24).

The frozen worker's job is declared `lost` by another worker once the lease ran out, never
re-run; a job approved while it is frozen is run by the other worker; when the frozen one
resumes it starts neither again. On PostgreSQL, the database several hosts share.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

import pytest
from proc_helpers import Procs, aat_env, job_said, outbox_files, state_of, wait_for
from test_faults import LEASE_S, S, _claims, _queue

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.trust.ledger import LEDGER_FILE


@pytest.mark.slow
def test_a_worker_stopped_past_its_lease_and_resumed_runs_nothing_twice(
    pg_settings: Settings, procs: Procs
) -> None:
    settings = pg_settings
    platform = Platform(settings)
    delay_s = 2.0
    first = _queue(platform, approved=True, subject="first", **{"delay-s": delay_s})
    env = aat_env(settings, worker_lease_s=LEASE_S, heartbeat_s=0.3)
    frozen = procs.start("frozen-worker", ["worker"], env)
    # Frozen mid-run: its decision recorded and the ledger's lock let go (it takes it once a
    # run, before the tool starts), not mid-record, which would stall this host's ledger.
    ledger = settings.home / LEDGER_FILE
    wait_for(lambda: ledger.exists() and ledger.read_bytes() and _free(ledger), 60, "the run")
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        procs.start("other-worker", ["worker"], env)
        wait_for(lambda: state_of(platform.engine, first) == S.lost, 30, "the job to be lost")
        second = _queue(platform, approved=True, subject="second")
        wait_for(
            lambda: state_of(platform.engine, second) == S.succeeded,
            90,
            "the other to run it",
            job_said(platform.engine, second),
        )
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    # Long enough for the resumed worker to finish what it was doing and look for work.
    time.sleep(delay_s + 3 * LEASE_S)
    assert frozen.poll() is None, "the resumed worker keeps serving"
    assert state_of(platform.engine, first) == S.lost
    assert state_of(platform.engine, second) == S.succeeded
    assert _claims(platform, first) == 1 and _claims(platform, second) == 1
    subjects = sorted(p.read_text().count('"subject": "') for p in outbox_files(settings))
    assert len(outbox_files(settings)) <= 2 and all(n == 1 for n in subjects)
    platform.engine.dispose()


def _free(ledger: Path) -> bool:
    """True when no process holds the ledger's lock now."""
    fd = os.open(ledger, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # lets go of the lock, if taken
    return True
