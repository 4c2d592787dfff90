"""A decision this host's ledger cannot record starts nothing and spends nothing (SPEC §24).

A full `AAT_HOME` disk, or a worker stopped while it held the ledger's lock, used to end the
approved job `failed` for good, though nothing had run. Now the worker gives the job back to
`approved` with the reason on its page, claims nothing for a heartbeat, and the job runs once
the ledger can record it: exactly once, its one record whole. Real files, a real tmpfs filled
to the last byte, the real worker and runner.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_ledger import _approved, _events, _job, _outbox, _worker

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import JobState
from webplatform.store.leases import HANDED_BACK
from webplatform.trust import ledger
from webplatform.worker import Worker

S = JobState


def _quick_worker(platform: Platform, ledger_path: Path) -> Worker:
    """A worker whose pause after a hand-back, and wait for the ledger's lock, are short."""
    settings = platform.settings.model_copy(update={"heartbeat_s": 0.2})
    worker = _worker(platform, settings)
    worker.ledger = ledger.DecisionLedger(ledger_path, lock_wait_s=0.3)
    return worker


def _run_when_it_may(worker: Worker, timeout_s: float = 10) -> None:
    """`run_once` until it claims something (after its pause), failing past `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not worker.run_once():
        assert time.monotonic() < deadline, "the worker never claimed the job again"
        time.sleep(0.05)


def _assert_handed_back(platform: Platform, job_id: int | None, why: str) -> None:
    job = _job(platform, job_id)
    assert job.state == S.approved, job.error
    assert job.worker_id is None and job.lease_expires_at is None
    assert job.note is not None and why in job.note and "\n" not in job.note
    assert "it starts once the ledger can record it" in job.note
    assert [e.event for e in _events(platform, job_id)].count(HANDED_BACK) == 1


def test_a_ledger_held_by_a_stopped_process_hands_the_job_back_until_it_is_free(
    platform: Platform, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    path = settings.home / ledger.LEDGER_FILE
    job = _approved(platform, "held")
    worker = _quick_worker(platform, path)
    # A worker stopped in the middle of its record: it holds the lock and never lets go.
    holder = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        assert worker.run_once()
        _assert_handed_back(platform, job.id, "is busy: another process has held its lock")
        assert f"job {job.id} handed back" in caplog.text
        assert not worker.run_once(), "a worker claims nothing for a heartbeat after a hand-back"
        assert _outbox(settings) == []
    finally:
        os.close(holder)  # the stopped process is killed or resumed: its lock goes
    _run_when_it_may(worker)
    done = _job(platform, job.id)
    assert done.state == S.succeeded and done.note is None
    assert len(_outbox(settings)) == 1
    assert [json.loads(r)["job"] for r in path.read_text().splitlines()] == [job.id]


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KiB tmpfs (CI runs as root), and a file that fills it to the last byte."""
    mount = tmp_path / "full"
    mount.mkdir(mode=0o700)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", mount], check=True
    )
    try:
        filler = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            with pytest.raises(OSError, match="No space left"):
                while True:
                    os.write(filler, b"\0" * 4096)
        finally:
            os.close(filler)
        yield mount
    finally:
        subprocess.run(["umount", "-l", mount], check=True)


def test_a_full_disk_hands_the_job_back_and_it_runs_once_space_is_back(
    platform: Platform, settings: Settings, full_disk: Path
) -> None:
    path = full_disk / ledger.LEDGER_FILE
    job = _approved(platform, "full")
    worker = _quick_worker(platform, path)
    assert worker.run_once()
    _assert_handed_back(platform, job.id, "No space left on device")
    assert _outbox(settings) == []
    assert path.read_bytes() == b"", "no part of a record that did not land is left"
    (full_disk / "filler").unlink()  # the operator frees space
    _run_when_it_may(worker)
    assert _job(platform, job.id).state == S.succeeded
    assert len(_outbox(settings)) == 1
    assert [json.loads(r)["job"] for r in path.read_text().splitlines()] == [job.id]
