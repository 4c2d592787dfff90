"""`aat audit tail` (SPEC §23): the export's JSON Lines for log shippers, following new events
as they are appended, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store.audit import AuditEntry

pytestmark = pytest.mark.integration


def tail_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
    return {**env, "AAT_HOME": str(settings.home), "AAT_DB_URL": settings.db_url.get_secret_value()}


def add_event(platform: Platform, event: str, detail: str) -> None:
    platform.audit.record(AuditEntry(actor="ada", event=event, detail=detail))


@pytest.fixture
def follower(platform: Platform) -> Iterator[queue.Queue[dict[str, Any]]]:
    """`aat audit tail --follow` running; each line it prints, decoded, in a queue."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "webplatform", "audit", "tail", "--follow"],
        env=tail_env(platform.settings),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(json.loads(line))  # every line is one JSON object

    threading.Thread(target=read, daemon=True).start()
    try:
        yield lines
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def next_line(lines: queue.Queue[dict[str, Any]], event: str) -> dict[str, Any]:
    """The first line about `event`, within 20 s."""
    while True:
        line = lines.get(timeout=20)
        if line["event"] == event:
            return line


def test_follow_prints_an_event_appended_after_it_started(
    platform: Platform, follower: queue.Queue[dict[str, Any]]
) -> None:
    add_event(platform, "operator-added", "before (ada)")
    assert next_line(follower, "operator-added")["detail"] == "before (ada)"
    add_event(platform, "operator-removed", "after")
    line = next_line(follower, "operator-removed")
    exported = platform.audit.export(None)
    assert line == exported[-1]  # the export's format: hashes, trace id and all
    assert line["prev_hash"] == exported[-2]["hash"] and len(line["hash"]) == 64
    assert "trace_id" in line


def test_since_and_the_latest_events_without_follow(platform: Platform) -> None:
    for n in range(12):
        add_event(platform, "login", f"n{n}")
    middle = platform.audit.export(None)[5]["at"]
    env = tail_env(platform.settings)
    argv = [sys.executable, "-m", "webplatform", "audit", "tail"]
    latest = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert [json.loads(x)["detail"] for x in latest.stdout.splitlines()] == [
        f"n{n}" for n in range(2, 12)
    ]
    since = subprocess.run(
        [*argv, "--since", middle], env=env, capture_output=True, text=True, timeout=60
    )
    assert [json.loads(x)["detail"] for x in since.stdout.splitlines()] == [
        f"n{n}" for n in range(5, 12)
    ]
    wrong = subprocess.run(
        [*argv, "--since", "yesterday"], env=env, capture_output=True, text=True, timeout=60
    )
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr.strip().count("\n") == 0 and "--since 'yesterday'" in wrong.stderr
