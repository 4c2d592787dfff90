"""Approve and allow similar (SPEC §16) in a real browser against a real `aat serve`: the card's
form, opened and filled while the queue refreshes, approves the waiting MCP call and makes
the rule; a second identical call from the MCP client then runs without a card. With a
passkey (a virtual authenticator), static/passkeys.js binds its challenge to the choices."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_helpers import (
    MESSAGE,
    OPERATOR,
    PASSWORD,
    McpCall,
    Server,
    add_to_store,
    queue_directly,
    wait_for_refresh,
    wait_state,
)
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.browser

# Beside the README's approvals screenshot; refreshed only with AAT_UPDATE_SCREENSHOTS=1.
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "approvals-allow-similar.png"


def test_approve_and_allow_similar_lets_the_next_identical_call_run(
    page: Page, server: Server, tmp_path: Path
) -> None:
    token = add_to_store(server.home, [], {"build-bot": OPERATOR})["build-bot"]
    first = McpCall(server, MESSAGE, token=token)
    first.start()
    card = page.locator("article.card[data-job-id]").first
    expect(card).to_be_visible(timeout=15_000)  # how fast it shows: test_approvals_browser
    job_id = int(card.get_attribute("data-job-id") or "0")
    card = page.locator(f"#card-{job_id}")
    expect(card.locator("[data-preview]")).to_contain_text("Quarterly report")
    card.get_by_text("Approve and allow similar", exact=True).click()
    form = card.locator("form.allow-similar-form")
    expect(form).to_contain_text("build-bot")
    form.locator("select[name=match_to]").select_option("exact")
    form.locator("select[name=match_subject]").select_option("any")
    form.locator("select[name=match_body]").select_option("any")
    form.locator("select[name=duration]").select_option("1h")
    form.locator("input[name=password]").fill(PASSWORD)
    wait_for_refresh(page, times=2)  # two refreshes of the queue: the form stays as filled
    expect(page.locator(f"#allow-similar-{job_id}")).to_have_attribute("open", "")
    expect(form.locator("select[name=match_subject]")).to_have_value("any")
    shot = SCREENSHOT if os.environ.get("AAT_UPDATE_SCREENSHOTS") == "1" else tmp_path / "s.png"
    # The page, clipped to the card: the queue's refresh may swap the card element meanwhile.
    # Scrolled to the top first, so the pinned batch bar sits above the queue, not over the card.
    page.evaluate("window.scrollTo(0, 0)")
    box = None
    for _ in range(20):  # None while a refresh swaps the card
        if (box := card.bounding_box()) is not None:
            break
    assert box is not None
    box["y"] += page.evaluate("window.scrollY")  # the clip is on the whole page, not the view
    page.screenshot(path=str(shot), full_page=True, clip=box)
    form.get_by_role("button", name="Approve and allow", exact=True).click()
    expect(page.locator("#notice")).to_contain_text(f"Approved job {job_id} and made rule 1")
    assert first.answer()["status"] == "succeeded"

    # The same call again (another subject: `any`): it runs at once, naming the rule.
    second = McpCall(server, {**MESSAGE, "subject": "Next quarter"}, token=token)
    second.start()
    answer = second.answer()
    assert answer["status"] == "succeeded", answer
    assert answer["allowed_by"]["rule"] == 1 and answer["allowed_by"]["by"] == OPERATOR
    assert answer["job"] != job_id and len(server.outbox()) == 2
    # No call waits (the decided card left its outcome where it was, SPEC §25).
    expect(page.locator("article.card[data-job-id]")).to_have_count(0)
    expect(page.locator(f'table.history tr[data-job-id="{answer["job"]}"]')).to_be_visible()


def test_a_passkey_confirms_approve_and_allow(chromium: Browser, server: Server) -> None:
    base = f"http://localhost:{server.port}"  # the passkeys' RP ID
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    options = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True}
    options |= {"hasUserVerification": True, "isUserVerified": True}
    cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})
    page.goto(f"{base}/login")
    page.fill("input[name=username]", OPERATOR)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{base}/account")
    page.fill("input[name=label]", "virtual key")
    page.fill("#add-passkey input[name=password]", PASSWORD)
    page.get_by_role("button", name="Add a passkey").click()
    page.wait_for_url(f"{base}/account?done=added")

    job_id = queue_directly(server, "weekly")
    page.goto(f"{base}/approvals")
    card = page.locator(f'article.card[data-job-id="{job_id}"]')
    card.get_by_text("Approve and allow similar", exact=True).click()
    form = card.locator("form.allow-similar-form")
    form.locator("select[name=match_subject]").select_option("any")
    form.locator("select[name=duration]").select_option("15m")
    with page.expect_request(f"{base}/jobs/{job_id}/allow-similar") as sent:
        form.get_by_role("button", name="Approve and allow", exact=True).click()  # no password
    assert "passkey=" in (sent.value.post_data or "")
    expect(page.locator("#notice")).to_contain_text(f"Approved job {job_id} and made rule 1")
    wait_state(page, base, job_id, "succeeded")
    page.goto(f"{base}/rules")
    expect(page.locator('tr[data-rule-id="1"]')).to_contain_text("x@example.org")
    context.close()
