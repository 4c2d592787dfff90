"""Previews (SPEC §16) as they run: a queued call's preview runs in the background, confined
with no writes, under its timeout and output cap, and never holds up the call's answer."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from platforms import platform_with
from sqlalchemy import update
from sqlmodel import col

from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.housekeeping import Housekeeper
from webplatform.jobs import decisions, previews
from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store import previews as preview_rows
from webplatform.store import queries
from webplatform.store.models import JobPreview, Surface, utcnow

TESTS = Path(__file__).resolve().parent
AGENT = Actor(surface=Surface.mcp_stdio, client="test-agent")


REGISTRY = f"{TESTS}:{EXAMPLES_ROOT}"


@pytest.fixture
def platform_settings(settings: Settings) -> Settings:
    """The test tools and the examples, on the test's database; previews time out at 3 s."""
    return settings.model_copy(update={"registry": REGISTRY, "preview_timeout_s": 3.0})


def queue(platform: Platform, action: str, text: str = "x", tool: str = "previewed") -> Answer:
    args = {"text": text} if tool == "previewed" else {}
    return request_run(
        platform=platform,
        call=RunCall(kind="tool", name=tool, action=action, args=args),
        actor=AGENT,
        consent=Consent.QUEUE,
    )


def row(platform: Platform, job_id: int) -> JobPreview | None:
    return platform.transact(lambda s: preview_rows.preview_of(session=s, job_id=job_id))


def landed(platform: Platform, job_id: int, timeout_s: float = 20) -> JobPreview:
    """The job's preview once it has finished."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = row(platform, job_id)
        assert found is not None, f"job {job_id} has no preview row"
        if found.state != "pending":
            return found
        assert time.monotonic() < deadline, f"job {job_id}'s preview is still pending"
        time.sleep(0.05)


def test_a_hanging_preview_neither_delays_the_answer_nor_outlives_its_timeout(
    platform: Platform,
) -> None:
    answer = queue(platform, "send-hang")
    assert answer.status is Status.pending_approval and answer.job is not None
    # Answered while the preview still runs: had queueing waited for it, it would have ended
    # (timed out) by now. A check of state, not of time, so a loaded machine cannot fail it.
    pending = row(platform, answer.job)
    assert pending is not None and pending.state == "pending" and pending.action == "hang"
    done = landed(platform, answer.job)
    assert done.state == "timed_out"
    assert done.error == (
        "the preview did not finish within 3 s and was stopped (AAT_PREVIEW_TIMEOUT_S)"
    )
    assert done.finished_at is not None
    assert 2.5 < (done.finished_at - pending.created_at).total_seconds() < 15


def test_a_preview_printing_10_mb_is_cut_to_64_kb_and_says_so(platform: Platform) -> None:
    done = landed(platform, queue(platform, "send-flood").job or 0)
    assert done.state == "failed" and done.truncated
    assert done.output is not None and done.output.startswith('{"junk": "xxx')
    assert len(done.output.encode()) <= previews.MAX_BYTES
    assert done.error is not None and "printed more than 64 KB" in done.error


def test_a_failing_preview_keeps_its_error(platform: Platform) -> None:
    done = landed(platform, queue(platform, "send-fail", text="the invoice").job or 0)
    assert done.state == "failed" and not done.truncated
    assert done.error is not None and "exit 1" in done.error
    assert "the preview of the invoice broke" in done.error


def test_a_preview_printing_html_is_kept_as_text_beside_its_error(platform: Platform) -> None:
    done = landed(platform, queue(platform, "send-html", text="hi").job or 0)
    assert done.state == "failed"
    assert done.error is not None and "non-JSON output" in done.error
    assert done.output is not None and "<script>alert('hi')</script>" in done.output


def test_a_good_preview_keeps_its_answer_in_the_tools_key_order(platform: Platform) -> None:
    done = landed(platform, queue(platform, "send-table", text="<b>bold</b>").job or 0)
    assert done.state == "succeeded" and done.error is None
    assert done.output == (
        '{"rows": [{"name": "first", "value": "<b>bold</b>"}, {"name": "second", "value": 2}]}'
    )


def test_a_preview_writes_nothing_but_its_scratch_folder(
    platform: Platform, tmp_path: Path
) -> None:
    workspace = tmp_path / "given"  # inside AAT_WORKSPACES (tmp_path): tools may write there
    workspace.mkdir()
    # The same action, run as an ordinary call, writes wherever the manifest and the
    # workspaces allow: what the preview is refused below is the preview's alone.
    direct = request_run(
        platform=platform,
        call=RunCall(kind="tool", name="previewed", action="write", args={"text": str(workspace)}),
        actor=AGENT,
        consent=Consent.NONE,
    )
    assert direct.result == {"scratch": "wrote", "declared": "wrote", "given": "wrote"}
    (workspace / "preview-probe.txt").unlink()
    (platform.settings.home / "data" / "previewed" / "preview-probe.txt").unlink()
    done = landed(platform, queue(platform, "send-write", text=str(workspace)).job or 0)
    assert done.state == "succeeded", done.error
    assert done.output is not None
    tried = previews_answer(done)
    assert tried["scratch"] == "wrote"
    # Landlock says "Permission denied"; where the tool also has namespaces of its own, the
    # read-only mount answers first.
    for place in ("declared", "given"):
        assert tried[place] in ("refused: Permission denied", "refused: Read-only file system")
    assert not (workspace / "preview-probe.txt").exists()


def previews_answer(done: JobPreview) -> Any:
    return json.loads(done.output or "null")


def test_no_preview_runs_where_tools_cannot_be_confined(settings: Settings) -> None:
    plat = platform_with(
        settings, registry=REGISTRY, unconfined="1", confine_pretend_unavailable=True
    )
    try:
        answer = queue(plat, "send-json")
        assert answer.status is Status.pending_approval
        done = landed(plat, answer.job or 0)
    finally:
        plat.engine.dispose()
    assert done.state == "failed" and done.output is None
    assert done.error is not None and "runs only where it cannot write" in done.error


def test_the_outbox_previews_what_a_delete_would_remove(platform: Platform) -> None:
    sent = request_run(
        platform=platform,
        call=RunCall(
            kind="tool",
            name="outbox",
            action="preview-message",
            args={"to": "bob@example.org", "subject": "s", "body": "b"},
        ),
        actor=AGENT,
        consent=Consent.NONE,
    )
    assert sent.status is Status.succeeded  # a preview action is an ordinary read-only one
    outbox = platform.settings.home / "outbox"
    outbox.mkdir(exist_ok=True)
    (outbox / "20250101T000000000000Z-1.json").write_text(
        '{"id": "1", "to": "bob@example.org", "subject": "Old news", "body": "b",'
        ' "sent_at": "2025-01-01T00:00:00+00:00"}'
    )
    done = landed(platform, queue(platform, "delete-messages", tool="outbox").job or 0)
    assert done.state == "succeeded", done.error
    assert previews_answer(done) == {
        "messages": [
            {
                "file": "20250101T000000000000Z-1.json",
                "to": "bob@example.org",
                "subject": "Old news",
                "sent_at": "2025-01-01T00:00:00+00:00",
            }
        ]
    }
    assert len(list(outbox.iterdir())) == 1  # nothing went


def test_retention_prunes_a_preview_with_its_job(platform: Platform) -> None:
    job_id = queue(platform, "send-json").job or 0
    landed(platform, job_id)
    decisions.deny(platform=platform, job_id=job_id, operator="olga", reason=None, address=None)
    later = utcnow() + timedelta(days=1)
    pruned = platform.transact(lambda s: queries.prune_finished(session=s, older_than=later))
    assert pruned == 1
    assert row(platform, job_id) is None


def _orphan(platform: Platform, job_id: int, **values: Any) -> None:
    """Leave job `job_id`'s preview as a process that ended before it would have."""
    platform.transact(
        lambda s: s.execute(
            update(JobPreview).where(col(JobPreview.job_id) == job_id).values(**values)
        )
    )


def _housekeeping(platform: Platform) -> None:
    Housekeeper(
        platform=platform, settings=platform.settings, process_id="keeper", role="worker"
    ).run_once()


@pytest.mark.parametrize(
    "left",
    [
        # its in-process `aat mcp` exited: stopped, and said so
        {"state": "failed", "error": previews.STOPPED},
        # its process was killed: still pending, long past its timeout
        {"state": "pending", "created_at": utcnow() - timedelta(minutes=10)},
    ],
    ids=["stopped", "killed"],
)
def test_a_preview_whose_process_is_gone_runs_again_at_the_next_housekeeping(
    platform: Platform, left: dict[str, Any]
) -> None:
    answer = queue(platform, "send-json", text="Q3 numbers")
    assert answer.job is not None
    landed(platform, answer.job)
    _orphan(platform, answer.job, **left)
    _housekeeping(platform)
    done = landed(platform, answer.job)
    assert (done.state, done.error) == ("succeeded", None)
    assert "Q3 numbers" in (done.output or "")
    _housekeeping(platform)  # once landed, nothing is run again
    assert row(platform, answer.job) == done


def test_a_decided_calls_orphaned_preview_is_left_alone(platform: Platform) -> None:
    answer = queue(platform, "send-json", text="Q3 numbers")
    assert answer.job is not None
    landed(platform, answer.job)
    decisions.deny(platform=platform, job_id=answer.job, operator="olga", reason=None, address=None)
    _orphan(platform, answer.job, state="failed", error=previews.STOPPED)
    _housekeeping(platform)
    left = row(platform, answer.job)
    assert left is not None and (left.state, left.error) == ("failed", previews.STOPPED)
