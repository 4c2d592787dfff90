"""The outbox's previews on the approvals page of a real `aat serve`, in Chromium (SPEC §16):
shown inside `[data-preview]` as text, never as markup, and landing by the page's own poll."""

from __future__ import annotations

import json

import pytest
from browser_helpers import (
    PASSWORD,
    McpCall,
    Server,
    job_state,
    new_card,
    run_no_wait,
    wait_state,
)
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

SUBJECT = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


def test_the_send_preview_lands_on_the_card_escaped(page: Page, server: Server) -> None:
    page.evaluate("window.loadedOnce = true")
    call = McpCall(server, {"to": "bob@example.org", "subject": SUBJECT, "body": "Hi"})
    call.start()
    card, job_id = new_card(page)
    preview = card.locator("[data-preview]")
    # "preview pending" first, perhaps too briefly to see; the queue's own poll brings it in.
    expect(preview).to_have_attribute("data-preview-state", "succeeded")
    assert page.evaluate("window.loadedOnce") is True  # no reload happened
    expect(preview).to_contain_text("preview-message")
    added = preview.locator("span.diff-add")
    expect(added.filter(has_text='"subject"')).to_have_text(
        f'+  "subject": "{SUBJECT.replace(chr(34), chr(92) + chr(34))}",'
    )
    expect(preview.locator("span.diff-file").first).to_have_text("--- /dev/null")
    assert preview.locator("img, script").count() == 0
    assert page.evaluate("window.pwned") is None
    assert server.outbox() == []  # previewing sent nothing
    card.get_by_role("button", name="Deny", exact=True).click()
    assert call.answer()["status"] == "denied"
    assert job_state(page, server.url, job_id) == "denied"
    expect(page.locator("[data-preview]")).to_have_attribute("data-preview-shape", "diff")


def test_the_delete_preview_lists_what_would_go(page: Page, server: Server) -> None:
    outbox = server.home / "outbox"
    outbox.mkdir(exist_ok=True)
    message = {"id": "1", "to": "ann@example.org", "subject": "<b>Minutes</b>", "body": "b"}
    (outbox / "20250101T000000000000Z-1.json").write_text(json.dumps(message))
    job_id = run_no_wait(server, "delete-messages")
    card = page.locator(f'article.card[data-job-id="{job_id}"]')
    preview = card.locator("[data-preview]")
    expect(preview).to_have_attribute("data-preview-shape", "table")
    expect(preview.locator("th")).to_have_text(["file", "to", "subject", "sent_at"])
    expect(preview.locator("tbody td").nth(2)).to_have_text("<b>Minutes</b>")
    assert preview.locator("tbody b").count() == 0
    assert len(server.outbox()) == 1  # nothing went


def test_a_deletion_whose_preview_changed_after_approval_comes_back_marked(
    page: Page, server: Server
) -> None:
    """SPEC §20 in Chromium: the card showed one message to delete; another lands before the
    run; the approval of the card as shown deletes nothing and the card comes back with both,
    marked changed; approved again, they go."""
    outbox = server.home / "outbox"
    outbox.mkdir(exist_ok=True)
    first = {"id": "1", "to": "ann@example.org", "subject": "Minutes", "body": "b"}
    (outbox / "20250101T000000000000Z-1.json").write_text(json.dumps(first))
    job_id = run_no_wait(server, "delete-messages")
    card = page.locator(f"#card-{job_id}")
    preview = card.locator("[data-preview]")
    expect(preview).to_have_attribute("data-preview-state", "succeeded")
    expect(preview.locator("tbody tr")).to_have_count(1)
    second = {"id": "2", "to": "bob@example.org", "subject": "Payroll", "body": "secret"}
    (outbox / "20250102T000000000000Z-2.json").write_text(json.dumps(second))
    card.locator(".approve-form input[name=password]").fill(PASSWORD)
    with page.expect_request(f"{server.url}/jobs/{job_id}/approve") as sent:
        card.get_by_role("button", name="Approve", exact=True).click()
    assert "preview=" in (sent.value.post_data or "")  # the card's preview, from its section
    changed = card.locator("[data-preview-changed]")
    expect(changed).to_contain_text("Changed since it was approved", timeout=20_000)
    expect(changed.locator("tbody tr")).to_have_count(2)
    expect(changed).to_contain_text("Payroll")
    assert len(server.outbox()) == 2  # nothing was deleted
    # The job page (job_state leaves it open) shows the same, and approves the new preview.
    assert job_state(page, server.url, job_id) == "pending_approval"
    expect(page.locator("[data-preview-changed]")).to_contain_text("Payroll")
    page.locator(".approve-form input[name=password]").fill(PASSWORD)
    page.get_by_role("button", name="Approve", exact=True).click()
    wait_state(page, server.url, job_id, "succeeded")
    assert server.outbox() == []
