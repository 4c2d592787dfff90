"""The approval queue in a real browser against a real `aat serve`, with a real MCP client
over streamable HTTP asking for the irreversible call; and the attacks that must fail."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
import pytest
from browser_helpers import (
    MESSAGE,
    PASSWORD,
    REBOUND_HOST,
    Attacker,
    McpCall,
    Server,
    job_state,
    new_card,
    queue_directly,
    wait_for_refresh,
    wait_state,
)
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.browser

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "approvals.png"


def test_mcp_request_appears_live_and_approve_runs_it_once(
    page: Page, server: Server, tmp_path: Path
):
    page.evaluate("window.loadedOnce = true")
    call = McpCall(server, MESSAGE, reason="The board asked for the numbers before Friday.")
    call.start()
    card, job_id = new_card(page)
    assert page.evaluate("window.loadedOnce") is True  # no reload happened
    expect(card).to_contain_text("outbox send-message")
    expect(card).to_contain_text("Quarterly report")
    expect(page).to_have_title(re.compile(r"^\(1\) Approvals"))
    # The README's screenshot is refreshed only on request, so a test run leaves the tree clean.
    shot = SCREENSHOT if os.environ.get("AAT_UPDATE_SCREENSHOTS") == "1" else tmp_path / "a.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 0
    card.locator(".approve-form input[name=password]").fill(PASSWORD)  # the step-up approving needs
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator("#notice")).to_contain_text(f"Approved job {job_id}.")
    answer = call.answer()
    assert answer["status"] == "succeeded", answer
    assert answer["job"] == job_id
    assert len(server.outbox()) == 1
    expect(page.locator(f'table.history tr[data-job-id="{job_id}"]')).to_contain_text("alice")
    # One run started, nothing left that could start another, and the server stopped: the
    # message was sent exactly once, for good.
    assert server.settle() == {job_id: 1}
    assert len(server.outbox()) == 1


def test_deny_with_a_reason_reaches_the_mcp_client(page: Page, server: Server):
    call = McpCall(server, MESSAGE)
    call.start()
    card, job_id = new_card(page)
    wait_for_refresh(page)
    card.get_by_role("textbox", name="Reason for denying").fill("not before the board meeting")
    wait_for_refresh(page, times=2)  # the typed reason is kept through the swaps
    expect(page.locator(f"#reason-{job_id}")).to_have_value("not before the board meeting")
    page.locator(f'[data-job-id="{job_id}"]').get_by_role("button", name="Deny", exact=True).click()
    answer = call.answer()
    assert answer["status"] == "denied", answer
    assert answer["reason"] == "not before the board meeting"
    assert answer["decided_by"] == "alice"
    assert server.outbox() == []


def test_a_form_on_another_origin_cannot_approve(page: Page, server: Server, attacker: Attacker):
    job_id = queue_directly(server)
    page.goto(f"{server.url}/jobs/{job_id}")
    digest = page.locator("input[name=digest]").first.input_value()
    token = page.locator("input[name=csrf_token]").first.input_value()
    attacker.html["/win.html"] = (
        f'<form id="f" method="post" action="{server.url}/jobs/{job_id}/approve">'
        f'<input name="digest" value="{digest}"><input name="csrf_token" value="{token}">'
        '</form><script>document.getElementById("f").submit()</script>'
    )
    with page.expect_response(f"{server.url}/jobs/{job_id}/approve") as response:
        page.goto(f"{attacker.url}/win.html")
    assert response.value.status == 403
    assert job_state(page, server.url, job_id) == "pending_approval"


def test_a_foreign_host_name_is_refused(page: Page, server: Server):
    response = page.goto(f"http://{REBOUND_HOST}:{server.port}/approvals")
    assert response is not None and response.status == 400
    raw = httpx.get(f"{server.url}/approvals", headers={"Host": "evil.example"})
    assert raw.status_code == 400


def test_a_post_without_a_session_is_refused(page: Page, chromium: Browser, server: Server):
    # Everything a real approval sends (the form's CSRF token, the digest, the password), read
    # from a logged-in page, sent from a context without the session cookie: the session
    # check alone must refuse it (its own message), and the job stays pending.
    job_id = queue_directly(server)
    page.goto(f"{server.url}/approvals")
    form = page.locator(f"#approve-{job_id}")
    fields = {
        name: form.locator(f"input[name={name}]").get_attribute("value") or ""
        for name in ("csrf_token", "digest", "return_to")
    }
    context = chromium.new_context()
    try:
        response = context.request.post(
            f"{server.url}/jobs/{job_id}/approve",
            form={**fields, "password": PASSWORD},
            headers={"Origin": server.url},
            max_redirects=0,
        )
        assert response.status == 403
        assert "log in first" in response.text()
    finally:
        context.close()
    raw = httpx.post(
        f"{server.url}/jobs/{job_id}/approve",
        data={**fields, "password": PASSWORD},
        headers={"Origin": server.url},
    )
    assert raw.status_code == 403 and "log in first" in raw.text
    assert job_state(page, server.url, job_id) == "pending_approval"


def test_the_approvals_page_cannot_be_framed(page: Page, server: Server, attacker: Attacker):
    queue_directly(server)
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text))
    attacker.html["/frame.html"] = f'<iframe src="{server.url}/approvals" width="900"></iframe>'
    page.goto(f"{attacker.url}/frame.html")
    page.wait_for_timeout(1500)
    framed = [f for f in page.frames if f != page.main_frame]
    assert framed, "the iframe element should exist"
    for frame in framed:
        try:
            buttons = frame.get_by_role("button", name="Approve").count()
        except Exception:  # an error page that cannot be scripted counts as blocked
            buttons = 0
        assert buttons == 0
    assert any("frame-ancestors" in text or "X-Frame-Options" in text for text in refused), refused


def test_a_refused_decision_answers_409_and_htmx_shows_why(page: Page, server: Server):
    job_id = queue_directly(server)
    card = page.locator(f'article.card[data-job-id="{job_id}"]')
    expect(card).to_be_visible(timeout=2500)
    # A stale page: the digest it carries is not the call's. Changed and clicked in one
    # script, so a poll of the queue cannot swap a fresh card in between.
    stale = f"""() => {{
        document.querySelector('#card-{job_id} input[name=digest]').value = '0'.repeat(64);
        document.querySelector('#card-{job_id} input[name=password]').value = '{PASSWORD}';
        document.querySelector('#card-{job_id} button.approve').click();
    }}"""
    with page.expect_response(f"{server.url}/jobs/{job_id}/approve") as response:
        page.evaluate(stale)
    assert response.value.status == 409
    expect(page.locator("#notice")).to_contain_text("review them again")
    assert page.url == f"{server.url}/approvals"  # swapped in place, no navigation
    expect(card).to_be_visible()  # still pending


def test_a_press_held_over_the_queues_refresh_still_approves(page: Page, server: Server):
    """A press and a release on two copies of a button are no click: while the operator
    holds the press (or types in a card), the queue's refresh waits, then resumes."""
    job_id = queue_directly(server)
    card = page.locator(f'article.card[data-job-id="{job_id}"]')
    expect(card).to_be_visible(timeout=15_000)
    card.locator(".approve-form input[name=password]").fill(PASSWORD)
    card.get_by_role("button", name="Approve", exact=True).hover()
    page.evaluate('document.getElementById("approvals-live").dataset.before = "1"')
    page.mouse.down()
    page.wait_for_timeout(2500)  # two refreshes would have swapped the card by now
    held = page.evaluate('document.getElementById("approvals-live").dataset.before')
    page.mouse.up()
    assert held == "1", "the queue was refreshed under the pressed button"
    expect(page.locator(f'table.history tr[data-job-id="{job_id}"]')).to_contain_text("alice")
    wait_for_refresh(page)  # and the refresh goes on once the decision is made
    wait_state(page, server.url, job_id, "succeeded")
