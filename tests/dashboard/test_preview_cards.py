"""A queued call's preview on its approval card and its job page (SPEC §16): always inside
`[data-preview]`, always escaped, shaped as a diff, a table or JSON, and its failures shown."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from dash_helpers import ORIGIN, PASSWORD, add_operator, csrf, queue_send
from fastapi.testclient import TestClient

from dashboard.app import create_app
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs.services import Consent, request_run
from webplatform.platform import Actor, Platform
from webplatform.store import previews as preview_rows
from webplatform.store.models import JobPreview, Surface, utcnow

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def platform_settings(settings: Settings) -> Settings:
    """The examples and the test tools (`previewed`), on this test's database."""
    changes = {"registry": f"{EXAMPLES_ROOT}:{TESTS}", "preview_timeout_s": 2.0}
    return settings.model_copy(update=changes)


@pytest.fixture
def app(platform: Platform) -> Any:
    return create_app(platform.settings, platform=platform, embed_worker=False, mcp=False)


def queue(platform: Platform, action: str, text: str) -> int:
    answer = request_run(
        platform=platform,
        kind="tool",
        name="previewed",
        action=action,
        args={"text": text},
        actor=Actor(surface=Surface.mcp_http, client="test-agent"),
        consent=Consent.QUEUE,
    )
    assert answer.job is not None, answer
    return answer.job


def landed(platform: Platform, job_id: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        row = platform.transact(lambda s: preview_rows.preview_of(session=s, job_id=job_id))
        if row is not None and row.state != "pending":
            return
        assert time.monotonic() < deadline, f"job {job_id}'s preview never landed"
        time.sleep(0.05)


def section(html: str, job_id: int | None = None) -> str:
    """The `[data-preview]` section (of job `job_id`'s card, on the approvals page)."""
    if job_id is not None:
        html = html[html.index(f'<article class="card" data-job-id="{job_id}"') :]
    start = html.index('<section class="preview" data-preview')
    return html[start : html.index("</section>", start) + len("</section>")]


def test_the_card_says_pending_until_the_preview_lands(platform: Platform, alice: TestClient):
    job_id = queue(platform, "send-hang", "x")
    card = section(alice.get("/approvals").text, job_id)
    assert 'data-preview-state="pending"' in card and "preview pending" in card
    # The poll that refreshes the queue picks the outcome up.
    landed(platform, job_id)
    polled = alice.get("/approvals", headers={"HX-Request": "true"}).text
    card = section(polled, job_id)
    assert 'data-preview-state="timed_out"' in card and "preview pending" not in card
    assert "did not finish within 2 s and was stopped (AAT_PREVIEW_TIMEOUT_S)" in card


def test_a_diff_shows_its_lines_marked_and_escaped(platform: Platform, alice: TestClient):
    job_id = queue(platform, "send-diff", "<script>alert(1)</script>")
    landed(platform, job_id)
    for html in (alice.get("/approvals").text, alice.get(f"/jobs/{job_id}").text):
        shown = section(html)
        assert 'data-preview-shape="diff"' in shown
        assert '<span class="diff-del">-old line</span>' in shown
        assert '<span class="diff-add">+&lt;script&gt;alert(1)&lt;/script&gt;</span>' in shown
        assert '<span class="diff-hunk">@@ -1 +1 @@</span>' in shown
        assert '<span class="diff-same"> kept</span>' in shown
        assert "<script>" not in shown


def test_a_list_of_objects_shows_as_a_table(platform: Platform, alice: TestClient):
    job_id = queue(platform, "send-table", "<b>bold</b>")
    landed(platform, job_id)
    shown = section(alice.get(f"/jobs/{job_id}").text)
    assert 'data-preview-shape="table"' in shown
    assert "<caption>rows</caption>" in shown
    assert "<th>name</th><th>value</th>" in shown
    assert "<td>first</td><td>&lt;b&gt;bold&lt;/b&gt;</td>" in shown
    assert "<td>second</td><td>2</td>" in shown
    assert "<b>" not in shown


def test_any_other_answer_shows_as_pretty_json_escaped(platform: Platform, alice: TestClient):
    job_id = queue(platform, "send-json", "<script>alert(1)</script>")
    landed(platform, job_id)
    shown = section(alice.get("/approvals").text, job_id)
    assert 'data-preview-shape="json"' in shown
    assert "&#34;would send&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;," in shown
    assert "<script>" not in shown


def test_a_preview_printing_html_shows_its_error_and_the_html_as_text(
    platform: Platform, alice: TestClient
):
    job_id = queue(platform, "send-html", "hi")
    landed(platform, job_id)
    shown = section(alice.get(f"/jobs/{job_id}").text)
    assert 'data-preview-state="failed"' in shown and 'data-preview-shape="text"' in shown
    assert "Preview failed: tool printed non-JSON output" in shown
    assert "&lt;html&gt;&lt;body&gt;&lt;script&gt;alert(&#39;hi&#39;)&lt;/script&gt;" in shown
    assert "<script>" not in shown and "<html>" not in shown


def test_a_failing_preview_shows_its_error(platform: Platform, alice: TestClient):
    job_id = queue(platform, "send-fail", "<i>the invoice</i>")
    landed(platform, job_id)
    shown = section(alice.get("/approvals").text, job_id)
    assert "Preview failed: exit 1: the preview of &lt;i&gt;the invoice&lt;/i&gt; broke" in shown


def test_a_flood_is_cut_on_the_card_and_kept_to_64_kb_on_the_job_page(
    platform: Platform, alice: TestClient
):
    job_id = queue(platform, "send-flood", "x")
    landed(platform, job_id)
    card = section(alice.get("/approvals").text, job_id)
    assert "the preview printed more than 64 KB; only the first 64 KB are kept" in card
    assert "only the first 8000 are shown here" in card
    assert f'href="/jobs/{job_id}">The job page shows all of it' in card
    page = section(alice.get(f"/jobs/{job_id}").text)
    junk = re.search(r"x{1000,}", page)
    assert junk is not None and 60_000 < len(junk.group()) <= 64 * 1024


def test_the_job_page_polls_only_the_preview_while_it_is_pending(
    platform: Platform, alice: TestClient
):
    job_id = queue(platform, "send-hang", "x")
    page = alice.get(f"/jobs/{job_id}").text
    assert f'hx-get="/jobs/{job_id}" hx-trigger="every 1s"' in section(page)
    landed(platform, job_id)
    fragment = alice.get(f"/jobs/{job_id}", headers={"HX-Request": "true"}).text
    assert fragment.lstrip().startswith('<section class="preview" data-preview')
    assert "hx-trigger" not in fragment and "<html" not in fragment


def test_a_preview_that_never_lands_says_so(platform: Platform, alice: TestClient):
    job_id = queue(platform, "send-plain", "x")
    # As if the process running its preview had died long ago, before recording anything.
    long_ago = utcnow() - timedelta(minutes=5)
    platform.transact(
        lambda s: s.add(JobPreview(job_id=job_id, action="hang", created_at=long_ago))
    )
    card = section(alice.get("/approvals").text, job_id)
    assert 'data-preview-state="stale"' in card
    assert "The preview never finished" in card


def test_the_outbox_card_shows_the_message_as_it_would_be_written(
    platform: Platform, alice: TestClient
):
    job_id = queue_send(platform, subject="<script>x</script>").job or 0
    landed(platform, job_id)
    shown = section(alice.get("/approvals").text, job_id)
    assert "<code>preview-message</code>" in shown
    assert "/outbox/(new message).json</span>" in shown
    assert (
        '<span class="diff-add">+  &#34;subject&#34;: &#34;&lt;script&gt;x&lt;/script&gt;&#34;,'
        "</span>" in shown
    )


def test_a_call_without_a_preview_shows_none(platform: Platform, alice: TestClient):
    job_id = queue(platform, "send-plain", "x")
    assert f'data-job-id="{job_id}"' in alice.get("/approvals").text
    assert "data-preview" not in alice.get("/approvals").text
    assert "data-preview" not in alice.get(f"/jobs/{job_id}").text


def test_an_edited_call_still_waiting_gets_a_preview_of_its_new_arguments(
    platform: Platform, client_as: Callable[[str], TestClient], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(platform.settings, "approvals_required", 2)
    add_operator(platform, "ada")
    ada = client_as("ada")
    original = queue_send(platform, subject="first draft").job or 0
    form = {
        "csrf_token": csrf(ada),
        "_password": PASSWORD,
        "to": "carol@example.org",
        "subject": "<i>second draft</i>",
        "body": "b",
    }
    done = ada.post(f"/jobs/{original}/edit", data=form, headers=ORIGIN)
    assert done.status_code == 303 and "done=edited-partial" in done.headers["location"]
    edited = int(done.headers["location"].split("/jobs/")[1].split("?")[0])
    landed(platform, edited)
    shown = section(ada.get(f"/jobs/{edited}").text)
    assert "&#34;subject&#34;: &#34;&lt;i&gt;second draft&lt;/i&gt;&#34;" in shown
