"""Notifications of pending approvals: what a notice says, and that each goes out once.

The claims run on SQLite and PostgreSQL; tests/integration/test_notify_stack.py sends real
notices from a real `aat serve` to a local HTTP sink.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from webplatform.canonical import args_digest
from webplatform.config import Settings
from webplatform.jobs import calls
from webplatform.notifications import check_urls, clean, new_pending_notice, reminder_notice
from webplatform.store import Job, JobState, Surface, transact, utcnow
from webplatform.store.notices import claim_new_pending, claim_reminders

ARGS = {"to": "ops@example.org", "subject": "hi", "body": "the-secret-body"}


def _pending(session: Session, *, ttl_s: float = 900) -> Job:
    call = calls.Call(
        kind="tool",
        name="outbox",
        action="send-message",
        args=ARGS,
        digest=args_digest(kind="tool", name="outbox", action="send-message", args=ARGS),
        irreversible=True,
        surface=Surface.mcp_stdio,
        client="opencode",
    )
    return calls.create_job(session=session, call=call, start=calls.Waiting(ttl_s=ttl_s))


def test_each_new_pending_job_is_claimed_by_exactly_one_caller(engine: Engine) -> None:
    ids = transact(engine, lambda s: [_pending(s).id, _pending(s).id])
    now = utcnow()
    first = transact(engine, lambda s: [j.id for j in claim_new_pending(session=s, now=now)])
    second = transact(engine, lambda s: [j.id for j in claim_new_pending(session=s, now=now)])
    assert first == ids and second == []


def test_the_reminder_is_due_with_a_fifth_of_the_window_left_and_goes_once(
    engine: Engine,
) -> None:
    job_id = transact(engine, lambda s: _pending(s, ttl_s=100).id)
    now = utcnow()
    transact(engine, lambda s: claim_new_pending(session=s, now=now))

    def remind(at: timedelta) -> list[int | None]:
        return transact(engine, lambda s: [j.id for j in claim_reminders(session=s, now=now + at)])

    assert remind(timedelta(seconds=70)) == [], "30 s of 100 left is not yet a fifth"
    assert remind(timedelta(seconds=82)) == [job_id]
    assert remind(timedelta(seconds=85)) == [], "a second reminder went out"


def test_a_notice_names_the_call_links_the_job_page_and_hides_the_arguments() -> None:
    settings = Settings(dashboard_url="https://aat.example.org/aat/")
    job = Job(
        id=7,
        kind="tool",
        name="outbox",
        action="send-message",
        args_json='{"body":"the-secret-body"}',
        args_digest="0" * 64,
        irreversible=True,
        state=JobState.pending_approval,
        surface=Surface.mcp_http,
        requested_by="build-bot\x1b[31m\u202e",
        agent_reason="clean up\x00 the\nlist",
        created_at=utcnow(),
        expires_at=utcnow() + timedelta(minutes=3),
    )
    notice = new_pending_notice(job=job, settings=settings)
    assert notice.title == "Approval needed: outbox send-message for build-bot [31m"
    assert "Reason: clean up the list" in notice.body
    assert "Open: https://aat.example.org/aat/jobs/7" in notice.body
    for text in (notice.title, notice.body):
        assert "the-secret-body" not in text and "approve" not in text.lower()
    reminder = reminder_notice(job=job, settings=settings, now=utcnow())
    assert reminder.title.startswith("Reminder") and "expires in 2 min" in reminder.body
    assert "Reason: clean up the list" in reminder.body
    job.agent_reason = "because " * 62  # 496 characters, within what an agent may send
    reason = new_pending_notice(job=job, settings=settings).body.splitlines()[0]
    assert reason.startswith("Reason: because because") and reason.endswith("…")
    assert len(reason) == len("Reason: ") + 300


def test_clean_clips_long_text_to_one_line() -> None:
    assert clean("a\r\nb\tc") == "a b c"
    assert len(clean("x" * 10_000)) == 200


@pytest.mark.parametrize("url", ["slack://abc", "not a url", "ntfy//topic"])
def test_a_malformed_url_is_named_by_its_place_in_one_line(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_urls(["json://127.0.0.1:9/ok", url])
    message = str(caught.value)
    assert "\n" not in message and message.startswith("AAT_NOTIFY entry 2 (")


def test_well_formed_urls_pass() -> None:
    check_urls(["ntfy://aat-approvals", "json://127.0.0.1:8080/hook", "mailto://u:p@example.org"])


# What `aat serve` and `aat worker` load before they serve: the dashboard app, the worker,
# and a housekeeper built from the environment's settings; first without AAT_NOTIFY, then
# with a URL in it. One process for both: each start with these imports costs CPU-seconds.
START = """
import os, sys
from dashboard.app import create_app
from webplatform.config import get_settings
from webplatform.housekeeping import Housekeeper
from webplatform.worker import make_worker

for notify in ("", "json://127.0.0.1:9/h"):
    os.environ["AAT_NOTIFY"] = notify
    Housekeeper(platform=None, settings=get_settings(), process_id="p", role="worker")
    print("apprise" in sys.modules)
"""


def test_apprise_is_loaded_only_when_aat_notify_names_a_url(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
    env["AAT_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-c", START], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
