"""The effect approved is the effect run (SPEC §20): an approval binds the preview the operator
saw, and the worker runs the preview again right before the run.

Each test queues a real `drafts publish` (tests/tools/drafts: its preview `show` reads the
draft file that `publish` publishes), lets its preview land, changes what the preview would
now say the way an agent could (a reversible `edit` call, or the file gone), approves the card
as it was shown, and runs the real worker.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sqlalchemy import text
from stepup_helpers import job_step_up

from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import decisions, recheck
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.decisions import Shown
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Actor, Platform
from webplatform.process import runner
from webplatform.store import previews as preview_rows
from webplatform.store.job_trail import jobs_out_of_step
from webplatform.store.models import Job, JobPreview, JobState, Surface
from webplatform.trust import signing
from webplatform.trust.ledger import LEDGER_FILE
from webplatform.worker import Worker

TESTS = Path(__file__).resolve().parent
AGENT = Actor(surface=Surface.mcp_stdio, client="test-agent")
HARMLESS = "Q3 numbers look fine"
SECRET = "the launch code is 0000"


@pytest.fixture
def platform_settings(settings: Settings) -> Settings:
    """The test tools (drafts) and the examples, on the test's database."""
    return settings.model_copy(update={"registry": f"{TESTS}:{EXAMPLES_ROOT}"})


def call(platform: Platform, action: str, consent: Consent, **args: str) -> Answer:
    """The agent calls `drafts action`."""
    return request_run(
        platform=platform,
        call=RunCall(kind="tool", name="drafts", action=action, args=dict(args)),
        actor=AGENT,
        consent=consent,
    )


def published(settings: Settings) -> list[str]:
    """What `publish` published, one draft a line."""
    out = settings.home / "data" / "drafts" / "published.txt"
    return out.read_text(encoding="utf-8").splitlines() if out.exists() else []


def preview(platform: Platform, job_id: int, timeout_s: float = 20) -> JobPreview:
    """Job `job_id`'s preview once it has landed."""
    deadline = time.monotonic() + timeout_s
    while True:
        row = platform.transact(lambda s: preview_rows.preview_of(session=s, job_id=job_id))
        assert row is not None, f"job {job_id} has no preview row"
        if row.state != "pending":
            return row
        assert time.monotonic() < deadline, f"job {job_id}'s preview is still pending"
        time.sleep(0.05)


def job(platform: Platform, job_id: int) -> Job:
    found = platform.transact(lambda s: jobs.get_job(session=s, job_id=job_id), write=False)
    assert found is not None
    return found


def approve_as_shown(platform: Platform, job_id: int, shown: JobPreview) -> Job:
    """Olga approves job `job_id` from a card that showed the preview `shown`."""
    return decisions.approve_shown(
        platform=platform,
        job_id=job_id,
        operator="olga",
        shown=Shown(job(platform, job_id).args_digest, shown.digest),
        address="127.0.0.1",
        step_up=job_step_up(platform, job_id, "olga"),
    )


def worker(platform: Platform) -> Worker:
    return Worker(
        platform=platform,
        settings=platform.settings,
        load_registry=platform.registry,
        run=runner.run,
        worker_id="w-test",
    )


def queued_publish(platform: Platform) -> tuple[int, JobPreview]:
    """The draft says HARMLESS; a `publish` waits with its preview landed, showing it."""
    assert call(platform, "edit", Consent.NONE, text=HARMLESS).status is Status.succeeded
    answer = call(platform, "publish", Consent.QUEUE)
    assert answer.status is Status.pending_approval and answer.job is not None
    shown = preview(platform, answer.job)
    assert shown.state == "succeeded" and HARMLESS in (shown.output or "")
    return answer.job, shown


def events(platform: Platform, job_id: int, event: str) -> list[str]:
    found = platform.transact(lambda s: jobs.audit_events(session=s, job_id=job_id), write=False)
    return [e.detail or "" for e in found if e.event == event]


def test_a_draft_rewritten_after_its_preview_is_not_published_on_the_old_approval(
    platform: Platform,
) -> None:
    job_id, shown = queued_publish(platform)
    # The agent rewrites the draft with a reversible call after the preview ran.
    assert call(platform, "edit", Consent.NONE, text=SECRET).status is Status.succeeded
    # The operator approves the card as it was shown: the harmless text.
    assert approve_as_shown(platform, job_id, shown).state is JobState.approved

    assert worker(platform).run_once()
    assert published(platform.settings) == []  # the secret was not published
    back = job(platform, job_id)
    assert back.state is JobState.pending_approval
    assert back.decided_by is None and back.decision_signature is None
    assert back.preview_digest is None and back.worker_id is None
    now = preview(platform, job_id)
    assert SECRET in (now.output or "") and now.changed_at is not None
    assert now.digest != shown.digest
    (said,) = events(platform, job_id, recheck.PREVIEW_CHANGED)
    assert "says something else than what was approved" in said and "drafts publish" in said
    # The agent waiting sees a call that waits for an operator again.
    assert job_answer(platform=platform, job_id=job_id).status is Status.pending_approval
    # `aat audit verify` finds the job's state and its events in step.
    assert platform.transact(lambda s: list(jobs_out_of_step(session=s)), write=False) == []

    # The card as it was is no approval any more; the new preview, approved, runs once.
    with pytest.raises(jobs.PreviewChanged):
        approve_as_shown(platform, job_id, shown)
    assert approve_as_shown(platform, job_id, now).state is JobState.approved
    assert worker(platform).run_once()
    assert job(platform, job_id).state is JobState.succeeded
    assert published(platform.settings) == [SECRET]
    assert not worker(platform).run_once()
    assert published(platform.settings) == [SECRET]
    # The ledger of started decisions holds the one that ran, not the one sent back.
    ledger = (platform.settings.home / LEDGER_FILE).read_text(encoding="ascii").splitlines()
    assert [json.loads(line)["job"] for line in ledger] == [job_id]


def test_an_unchanged_preview_runs_the_call_once(platform: Platform) -> None:
    job_id, shown = queued_publish(platform)
    approve_as_shown(platform, job_id, shown)
    assert worker(platform).run_once()
    assert job(platform, job_id).state is JobState.succeeded
    assert published(platform.settings) == [HARMLESS]
    assert events(platform, job_id, recheck.PREVIEW_CHANGED) == []


def test_a_preview_that_fails_when_run_again_blocks_the_run(platform: Platform) -> None:
    job_id, shown = queued_publish(platform)
    approve_as_shown(platform, job_id, shown)
    (platform.settings.home / "data" / "drafts" / "draft.txt").unlink()

    assert worker(platform).run_once()
    assert published(platform.settings) == []
    assert job(platform, job_id).state is JobState.pending_approval
    now = preview(platform, job_id)
    assert now.state == "failed" and now.changed_at is not None
    assert "there is no draft to publish" in (now.error or "")
    (said,) = events(platform, job_id, recheck.PREVIEW_CHANGED)
    assert "failed" in said


def test_the_signature_covers_the_preview_digest(platform: Platform) -> None:
    job_id, shown = queued_publish(platform)
    approve_as_shown(platform, job_id, shown)
    verifier = signing.verifier_for(platform.settings)
    approved = job(platform, job_id)
    assert approved.preview_digest == shown.digest
    assert verifier.problem(approved) is None
    for forged in ("0" * 64, None):  # another preview's digest, or none at all
        approved.preview_digest = forged
        assert verifier.problem(approved) is not None
    # A database writer swaps the approved digest for the new preview's: nothing runs.
    assert call(platform, "edit", Consent.NONE, text=SECRET).status is Status.succeeded
    with platform.engine.begin() as conn:
        conn.execute(
            text("UPDATE job SET preview_digest = :d WHERE id = :id"),
            {
                "d": "f" * 64,
                "id": job_id,
            },
        )
    assert worker(platform).run_once()
    refused = job(platform, job_id)
    assert refused.state is JobState.failed and "invalid signature" in (refused.error or "")
    assert published(platform.settings) == []
