"""An approval binds the preview its page showed, and a call whose preview changed before its
run comes back to its card marked "changed since it was approved" (SPEC §20).

A real dashboard app and a real worker, over `drafts publish` (tests/tools/drafts: its preview
reads the draft that `publish` publishes; `edit` rewrites it, a reversible call).
"""

from __future__ import annotations

import html
import re
import time
from pathlib import Path
from typing import Any

import pytest
from dash_helpers import ORIGIN, PASSWORD, csrf
from fastapi.testclient import TestClient

from dashboard.app import create_app
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.process import runner
from webplatform.store import previews as preview_rows
from webplatform.store.models import Job, JobState, Surface
from webplatform.store.transitions import UNSIGNED_APPROVAL
from webplatform.worker import Worker

TESTS = Path(__file__).resolve().parents[1]
AGENT = Actor(surface=Surface.mcp_http, client="test-agent")


@pytest.fixture
def platform_settings(settings: Settings) -> Settings:
    """The test tools (drafts) and the examples, on this test's database."""
    return settings.model_copy(update={"registry": f"{TESTS}:{EXAMPLES_ROOT}"})


@pytest.fixture
def app(platform: Platform) -> Any:
    return create_app(platform.settings, platform=platform, embed_worker=False, mcp=False)


def drafts(platform: Platform, action: str, consent: Consent, **args: str) -> int:
    answer = request_run(
        platform=platform,
        call=RunCall(kind="tool", name="drafts", action=action, args=dict(args)),
        actor=AGENT,
        consent=consent,
    )
    assert answer.job is not None and answer.status is not Status.failed, answer
    return answer.job


def landed(platform: Platform, job_id: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        row = platform.transact(lambda s: preview_rows.preview_of(session=s, job_id=job_id))
        if row is not None and row.state != "pending":
            return
        assert time.monotonic() < deadline, f"job {job_id}'s preview never landed"
        time.sleep(0.05)


def job(platform: Platform, job_id: int) -> Job:
    found = platform.transact(lambda s: jobs.get_job(session=s, job_id=job_id), write=False)
    assert found is not None
    return found


def card(page: str, job_id: int) -> str:
    start = page.index(f'<article class="card" data-job-id="{job_id}"')
    return page[start : page.index("</article>", start)]


def shown_preview(client: TestClient, job_id: int) -> tuple[str, str]:
    """(the card's preview section, the preview digest its Approve form sends)."""
    html_card = card(client.get("/approvals").text, job_id)
    start = html_card.index('<section class="preview" data-preview')
    section = html_card[start : html_card.index("</section>", start)]
    found = re.search(
        rf'<input type="hidden" name="preview" value="([0-9a-f]*)" form="approve-{job_id}">',
        section,
    )
    assert found is not None, section
    return section, found.group(1)


def approve(client: TestClient, platform: Platform, job_id: int, preview: str) -> Any:
    form = {
        "csrf_token": csrf(client),
        "password": PASSWORD,
        "digest": job(platform, job_id).args_digest,
        "preview": preview,
        "return_to": "approvals",
    }
    return client.post(f"/jobs/{job_id}/approve", data=form, headers=ORIGIN)


def run_worker(platform: Platform) -> None:
    worker = Worker(
        platform=platform,
        settings=platform.settings,
        load_registry=platform.registry,
        run=runner.run,
        worker_id="w-test",
    )
    assert worker.run_once()


def test_a_call_whose_preview_changed_returns_to_its_card_marked_and_needs_the_new_one(
    platform: Platform, alice: TestClient
) -> None:
    drafts(platform, "edit", Consent.NONE, text="Q3 numbers look fine")
    job_id = drafts(platform, "publish", Consent.QUEUE)
    landed(platform, job_id)
    section, seen = shown_preview(alice, job_id)
    assert "Q3 numbers look fine" in section and "changed since it was approved" not in section
    drafts(platform, "edit", Consent.NONE, text="the launch code is 0000")
    assert approve(alice, platform, job_id, seen).status_code == 303
    run_worker(platform)
    assert job(platform, job_id).state is JobState.pending_approval

    section, now = shown_preview(alice, job_id)
    shown = html.unescape(section)
    assert "data-preview-changed" in section
    assert "Changed since it was approved" in shown and "the launch code is 0000" in shown
    assert now != seen
    # The job page's Approve binds the same preview, marked the same way.
    page = alice.get(f"/jobs/{job_id}").text
    assert f'name="preview" value="{now}" form="approve-{job_id}"' in page
    assert 'id="approve-' + str(job_id) + '"' in page and "Changed since it was approved" in page
    # The page as it was before the change approves nothing.
    stale = approve(alice, platform, job_id, seen)
    assert stale.status_code == 409
    assert "preview changed since this page showed it" in html.unescape(stale.text)
    assert job(platform, job_id).state is JobState.pending_approval
    assert approve(alice, platform, job_id, now).status_code == 303
    assert job(platform, job_id).state is JobState.approved
    # Its signature covers the preview, and every page that names the approver checks it.
    for path in ("/jobs", "/approvals", f"/jobs/{job_id}"):
        shown = alice.get(path).text
        assert UNSIGNED_APPROVAL not in shown, path
    history = alice.get("/jobs").text
    row = history[history.index(f'href="/jobs/{job_id}"') :]
    assert "<td>alice</td>" in row[: row.index("</tr>")]


def test_approve_selected_binds_each_cards_preview(platform: Platform, alice: TestClient) -> None:
    drafts(platform, "edit", Consent.NONE, text="first")
    job_id = drafts(platform, "publish", Consent.QUEUE)
    landed(platform, job_id)
    page = alice.get("/approvals").text
    found = re.search(
        rf'<input type="hidden" name="preview_{job_id}" value="([0-9a-f]*)" form="batch">', page
    )
    assert found is not None
    form = {
        "csrf_token": csrf(alice, "/approvals"),
        "job": [str(job_id)],
        f"digest_{job_id}": job(platform, job_id).args_digest,
        f"preview_{job_id}": "0" * 64,  # a preview this card no longer shows
        "password": PASSWORD,
    }
    refused = alice.post("/approvals/approve", data=form, headers=ORIGIN | {"HX-Request": "true"})
    assert refused.status_code == 409
    assert "its preview changed since the page showed it" in html.unescape(refused.text)
    form[f"preview_{job_id}"] = found.group(1)
    assert alice.post("/approvals/approve", data=form, headers=ORIGIN).status_code == 200
    assert job(platform, job_id).preview_digest == found.group(1)


def test_approve_and_allow_similar_binds_the_cards_preview(
    platform: Platform, alice: TestClient
) -> None:
    drafts(platform, "edit", Consent.NONE, text="first")
    job_id = drafts(platform, "publish", Consent.QUEUE)
    landed(platform, job_id)
    section, seen = shown_preview(alice, job_id)
    assert f'name="preview" value="{seen}" form="allow-similar-form-{job_id}"' in section
    form = {
        "csrf_token": csrf(alice, "/approvals"),
        "digest": job(platform, job_id).args_digest,
        "return_to": "job",
        "duration": "1h",
        "password": PASSWORD,
        "preview": "0" * 64,  # a preview this card no longer shows
    }
    refused = alice.post(f"/jobs/{job_id}/allow-similar", data=form, headers=ORIGIN)
    assert refused.status_code == 409
    assert "no rule was made" in html.unescape(refused.text)
    assert job(platform, job_id).state is JobState.pending_approval
    made = alice.post(
        f"/jobs/{job_id}/allow-similar", data=form | {"preview": seen}, headers=ORIGIN
    )
    assert made.status_code == 200, made.text
    assert job(platform, job_id).preview_digest == seen
