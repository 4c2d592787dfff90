"""A host whose clock jumped an hour either way (SPEC §24): no job runs early, late past its
window, or twice.

Real `aat worker` and `aat serve` processes run under libfaketime (the Debian `faketime`
package), an hour behind or ahead of the test process and of PostgreSQL, beside honest-clock
processes on the same database. Where hosts decide with time (an approval window closing, a
lease running out, a decision too old to start), aat reads the database server's clock.

Debian's libfaketime (0.9.10) hands Python 3.11's `time.sleep` a negative deadline when the
monotonic clock is left alone (wolfcw/libfaketime#426), and faking the monotonic clock hangs
timed waits instead; so the skewed processes sleep on a timed wait (a `sitecustomize` on
their PYTHONPATH), and the tools they start run without the preload.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from proc_helpers import Procs, aat_env, job_said, outbox_files, state_of, wait_for
from serving import free_port
from stepup_helpers import preview_landed
from test_faults import LEASE_S, PASSWORD, S, _claims, _log_in, _queue

from webplatform.config import Settings
from webplatform.platform import Platform

pytestmark = [pytest.mark.integration, pytest.mark.postgresql, pytest.mark.slow]

SHORT_TTL_S = 3.0
HOUR_S = 3600


def _libfaketime() -> Path:
    """libfaketime's multi-threaded preload library (Debian package `libfaketime`)."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    if not found:
        pytest.fail("libfaketime is missing: apt-get install faketime")
    return found[0]


# Loaded by the skewed processes only (see the module's docstring).
_SLEEP_SHIM = """\
import os, threading, time
if os.environ.get("FAKETIME"):
    time.sleep = lambda seconds: threading.Event().wait(seconds) and None
    os.environ.pop("LD_PRELOAD", None)  # FAKETIME stays: libfaketime reads it again
"""


def _skewed(env: dict[str, str], offset: str, site: Path) -> dict[str, str]:
    """`env` with the wall clock moved by `offset` ("-1h", "+1h"); monotonic time is left
    alone, as a stepped wall clock leaves it. `site`: a folder for the sleep shim."""
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SLEEP_SHIM)
    path = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    skewed = env | {
        "LD_PRELOAD": str(_libfaketime()),
        "FAKETIME": offset,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "PYTHONPATH": path,
    }
    probe = [sys.executable, "-c", "import time; print(time.time())"]
    seen = float(subprocess.run(probe, env=skewed, capture_output=True, check=True).stdout)
    assert abs(seen - time.time() - int(offset[0] + "1") * HOUR_S) < 60, "faketime is not in force"
    return skewed


def _short_window(settings: Settings) -> Platform:
    """A platform whose pending calls wait `SHORT_TTL_S` for an approval."""
    return Platform(settings.model_copy(update={"approval_ttl_s": SHORT_TTL_S}))


def _subjects(settings: Settings) -> list[str]:
    """The subjects of the messages sent, one entry per message."""
    found = [re.findall(r'"subject": "([^"]*)"', p.read_text()) for p in outbox_files(settings)]
    return sorted(subject for subjects in found for subject in subjects)


def test_a_worker_an_hour_behind_starts_nothing_past_its_window_and_loses_no_lease(
    pg_settings: Settings, procs: Procs, tmp_path: Path
) -> None:
    settings = pg_settings
    platform, short = Platform(settings), _short_window(settings)
    env = aat_env(settings, worker_lease_s=LEASE_S, approval_ttl_s=SHORT_TTL_S, heartbeat_s=0.3)
    late = _queue(platform, approved=True, subject="late")
    lapsing = _queue(short, approved=False, subject="lapsing")
    decided = platform.jobs.get(late)
    assert decided is not None and decided.decided_at is not None
    too_old = decided.decided_at + timedelta(seconds=SHORT_TTL_S + LEASE_S + 0.5)
    # Nobody claims it until its decision is older than the window plus the lease.
    wait_for(lambda: platform.jobs.now() > too_old, 30, "the approval to grow too old")

    procs.start("behind", ["worker"], _skewed(env, "-1h", tmp_path / "site"))
    wait_for(lambda: state_of(platform.engine, late) == S.failed, 30, "the late job refused")
    wait_for(lambda: state_of(platform.engine, lapsing) == S.expired, 30, "the window to close")
    refused = platform.jobs.get(late)
    assert refused is not None and refused.error
    assert "older than the approval window plus the lease" in refused.error

    # A slow run on the skewed worker keeps its lease against an honest worker's reaping.
    slow = _queue(platform, approved=True, subject="slow", **{"delay-s": 2 * LEASE_S})
    wait_for(lambda: state_of(platform.engine, slow) == S.running, 30, "the slow job to start")
    procs.start("honest", ["worker"], env)
    wait_for(lambda: state_of(platform.engine, slow) == S.succeeded, 60, "the slow job to end")
    assert _claims(platform, late) == 1 and _claims(platform, slow) == 1
    assert _subjects(settings) == ["slow"]
    platform.engine.dispose()
    short.engine.dispose()


def _approve_through(base: str, job_id: int) -> None:
    """Approve job `job_id` on the dashboard at `base`, as an operator's browser does."""
    # A skewed process is slower to answer on a loaded machine than httpx's 5 s allow.
    with httpx.Client(base_url=base, timeout=60) as browser:
        _log_in(browser, base)
        page = browser.get(f"/jobs/{job_id}").text
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page)
        digest = re.search(r'name="digest" value="([0-9a-f]+)"', page)
        assert token and digest, page[:500]
        decided = browser.post(
            f"/jobs/{job_id}/approve",
            data={"csrf_token": token[1], "digest": digest[1], "return_to": "job"}
            | {"password": PASSWORD},
            headers={"Origin": base},
        )
        assert decided.status_code in (200, 303), decided.text[:300]


def test_a_server_an_hour_ahead_expires_nothing_early_and_reaps_no_live_lease(
    pg_settings: Settings, procs: Procs, tmp_path: Path
) -> None:
    settings = pg_settings
    platform, short = Platform(settings), _short_window(settings)
    platform.operators.add("olga", PASSWORD)
    env = aat_env(settings, worker_lease_s=LEASE_S, heartbeat_s=0.3)
    procs.start("honest", ["worker"], env)
    slow = _queue(platform, approved=True, subject="slow", **{"delay-s": 2 * LEASE_S})
    wait_for(lambda: state_of(platform.engine, slow) == S.running, 30, "the slow job to start")

    port = free_port()
    procs.serve("ahead", _skewed(env, "+1h", tmp_path / "site"), port)
    waiting = _queue(platform, approved=False, subject="waiting")
    lapsing = _queue(short, approved=False, subject="lapsing")
    wait_for(lambda: state_of(platform.engine, lapsing) == S.expired, 30, "the window to close")
    assert state_of(platform.engine, waiting) == S.pending_approval, "expired an hour early"
    wait_for(lambda: state_of(platform.engine, slow) == S.succeeded, 60, "the slow job to end")

    preview_landed(platform, waiting)
    _approve_through(f"http://127.0.0.1:{port}", waiting)
    wait_for(
        lambda: state_of(platform.engine, waiting) == S.succeeded,
        60,
        "the approved run",
        job_said(platform.engine, waiting),
    )
    assert _claims(platform, slow) == 1 and _claims(platform, waiting) == 1
    assert _subjects(settings) == ["slow", "waiting"]
    platform.engine.dispose()
    short.engine.dispose()
