"""A worker frozen (SIGSTOP) inside a transaction (SPEC §24): PostgreSQL ends its session once
it has sat idle in the transaction for `AAT_DB_IDLE_IN_TRANSACTION_S`, so its locks (the job's
row, the audit chain's) are let go and other workers go on; resumed, it runs nothing twice.

The frozen worker is a real `aat worker` whose `sitecustomize` stops the process right after
its claim's UPDATE has run and before it commits: the moment a stop holds most (the chain's
lock, which every audited move on every host waits for, and the job's row).
"""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path

import pytest
from proc_helpers import Procs, aat_env, outbox_files, state_of, wait_for
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from test_faults import LEASE_S, S, _claims, _queue

from webplatform.config import Settings
from webplatform.platform import Platform

pytestmark = [pytest.mark.integration, pytest.mark.postgresql, pytest.mark.slow]

# How long the frozen worker's session may idle inside a transaction (the default is 60 s).
IDLE_S = 3
_FREEZE = "AAT_TEST_FREEZE_IN_CLAIM"
# Installed in the frozen worker only (the variable is dropped, so its tools do not load it).
_SHIM = f"""
import os

if os.environ.pop("{_FREEZE}", None):
    import signal

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    frozen = []

    @event.listens_for(Engine, "after_cursor_execute")
    def _stop_inside_the_claim(conn, cursor, statement, parameters, context, many):
        claims = isinstance(parameters, dict) and "running" in parameters.values()
        if not frozen and statement.startswith("UPDATE job SET") and claims:
            frozen.append(True)
            os.kill(os.getpid(), signal.SIGSTOP)
"""


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def _row_locked(platform: Platform, job_id: int) -> bool:
    """Whether another session holds the job's row lock right now."""
    try:
        with platform.engine.connect() as conn:
            conn.execute(text("SET LOCAL lock_timeout = '100ms'"))
            conn.execute(text("SELECT id FROM job WHERE id = :id FOR UPDATE"), {"id": job_id})
    except OperationalError:
        return True
    return False


def test_a_worker_frozen_inside_its_claim_lets_the_others_go_on_and_runs_nothing_twice(
    pg_settings: Settings, procs: Procs, tmp_path: Path
) -> None:
    settings = pg_settings
    platform = Platform(settings)
    env = aat_env(settings, worker_lease_s=LEASE_S, heartbeat_s=0.3)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(_SHIM))
    path = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    freezing = env | {
        "PYTHONPATH": path,
        _FREEZE: "1",
        "AAT_DB_IDLE_IN_TRANSACTION_S": str(IDLE_S),
    }
    frozen = procs.start("frozen", ["worker"], freezing)
    wait_for(lambda: "started" in procs.log("frozen"), 60, "the worker to start")
    first = _queue(platform, approved=True, subject="first")
    wait_for(lambda: _stopped(frozen.pid), 60, "the worker to stop inside its claim")
    stopped_at = time.monotonic()
    # The frozen claim holds the job's row (and the audit chain) for everyone.
    assert _row_locked(platform, first)
    procs.start("other", ["worker"], env)
    wait_for(lambda: state_of(platform.engine, first) == S.succeeded, 60, "the other worker's run")
    freed_s = time.monotonic() - stopped_at
    os.kill(frozen.pid, signal.SIGCONT)
    # Resumed, it finds its session ended (its claim never committed) and goes on.
    wait_for(lambda: "cannot be reached" in procs.log("frozen"), 60, "the resumed worker's line")
    second = _queue(platform, approved=True, subject="second")
    wait_for(lambda: state_of(platform.engine, second) == S.succeeded, 60, "the next run")
    print(f"frozen in a transaction: its locks let go and the job run {freed_s:.1f} s later")
    assert _claims(platform, first) == 1 and _claims(platform, second) == 1
    assert len(outbox_files(settings)) == 2
    said = procs.log("frozen")
    assert f"job {first}:" not in said and "Traceback" not in said, said
    assert "idle-in-transaction timeout" in said, said
    platform.engine.dispose()
