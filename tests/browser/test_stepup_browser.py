"""Step-up approvals in Chromium against a real `aat serve`: a passkey registered on the
account page (with the operator's password: the session alone adds none) with a virtual
authenticator (DevTools `WebAuthn` domain) approves a queued job,
which runs; a replay with the cookie and CSRF token alone, an assertion made for another
job, and a reused challenge are all refused. The password step-up, typed in the card."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import pytest
from browser_helpers import OPERATOR, PASSWORD, Server, job_state, queue_directly, wait_state
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.browser

# Runs in the page: a passkey assertion over a challenge the server binds to `job`.
ASSERT_FOR_JOB = """async ([job, digest]) => {
  const csrf = document.querySelector('input[name="csrf_token"]').value;
  const r = await fetch("/stepup/options", {method: "POST", headers: {
      "Content-Type": "application/json", "X-CSRF-Token": csrf},
    body: JSON.stringify({purpose: "approve", digest: digest, job_id: job})});
  const options = PublicKeyCredential.parseRequestOptionsFromJSON(await r.json());
  const credential = await navigator.credentials.get({publicKey: options});
  return JSON.stringify(credential.toJSON());
}"""


@pytest.fixture
def local_page(chromium: Browser, server: Server) -> Iterator[Page]:
    """Alice logged in at http://localhost:<port> (the passkeys' RP ID), with a virtual
    platform authenticator that verifies the user."""
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
            }
        },
    )
    page.goto(f"http://localhost:{server.port}/login")
    page.fill("input[name=username]", OPERATOR)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"http://localhost:{server.port}/")
    yield page
    context.close()


def _post_approve(page: Page, base: str, job_id: int, **form: str) -> Any:
    return page.request.post(
        f"{base}/jobs/{job_id}/approve",
        form={"return_to": "job", **form},
        headers={"Origin": base},
        max_redirects=0,
    )


def test_a_passkey_approves_and_replays_are_refused(local_page: Page, server: Server):
    page, base = local_page, f"http://localhost:{server.port}"
    page.goto(f"{base}/account")
    page.fill("input[name=label]", "virtual key")
    # The session alone adds no passkey (a page holding the cookie could): it asks for the
    # password, and with it the browser's authenticator makes one.
    page.get_by_role("button", name="Add a passkey").click()
    expect(page.locator("#passkey-error")).to_contain_text(
        "adding a passkey needs your current password"
    )
    expect(page.locator("table.passkeys")).to_contain_text("No passkeys yet")
    page.fill("#add-passkey input[name=password]", PASSWORD)
    page.get_by_role("button", name="Add a passkey").click()
    page.wait_for_url(f"{base}/account?done=added")
    expect(page.locator("table.passkeys")).to_contain_text("virtual key")

    first = queue_directly(server, "first")
    page.goto(f"{base}/approvals")
    card = page.locator(f'article.card[data-job-id="{first}"]')
    expect(card).to_be_visible()
    expect(card.locator(".recent-passkey")).to_contain_text("Your newest passkey, “virtual key”")
    with page.expect_request(f"{base}/jobs/{first}/approve") as sent:
        card.get_by_role("button", name="Approve", exact=True).click()  # password left empty
    assert "passkey=" in (sent.value.post_data or "")
    expect(page.locator("#notice")).to_contain_text(f"Approved job {first}.")
    wait_state(page, base, first, "succeeded")
    assert len(server.outbox()) == 1
    page.goto(f"{base}/jobs/{first}")
    expect(page.locator("ol.timeline")).to_contain_text("step-up: passkey")
    used_assertion = parse_qs(sent.value.post_data or "")["passkey"][0]

    second, third = queue_directly(server, "second"), queue_directly(server, "third")
    page.goto(f"{base}/jobs/{second}")
    csrf = page.locator("input[name=csrf_token]").first.input_value()
    second_digest = page.locator("input[name=digest]").first.input_value()
    page.goto(f"{base}/jobs/{third}")
    third_digest = page.locator("input[name=digest]").first.input_value()

    # The stolen-cookie replay: session cookie and CSRF token, no step-up.
    replay = _post_approve(page, base, second, csrf_token=csrf, digest=second_digest)
    assert replay.status == 403 and "fresh proof" in replay.text()

    # An assertion the operator made for job 2, sent to approve job 3.
    page.goto(f"{base}/approvals")
    for_second = page.evaluate(ASSERT_FOR_JOB, [second, second_digest])
    other = _post_approve(
        page, base, third, csrf_token=csrf, digest=third_digest, passkey=for_second
    )
    assert other.status == 403 and "another call" in other.text()

    # Job 1's assertion again (its challenge was consumed when job 1 was approved).
    reused = _post_approve(
        page,
        base,
        second,
        csrf_token=csrf,
        digest=second_digest,
        passkey=used_assertion,
    )
    assert reused.status == 403 and "already used" in reused.text()

    assert job_state(page, base, second) == "pending_approval"
    assert job_state(page, base, third) == "pending_approval"
    assert len(server.outbox()) == 1


def test_password_in_the_card_approves_and_without_it_nothing_does(page: Page, server: Server):
    job_id = queue_directly(server, "by password")
    page.goto(f"{server.url}/approvals")
    card = page.locator(f'article.card[data-job-id="{job_id}"]')
    expect(card).to_be_visible()
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator("#notice")).to_contain_text("type your password")
    card.locator(".approve-form input[name=password]").fill("not the password")
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator("#notice")).to_contain_text("wrong password")
    page.goto(f"{server.url}/jobs/{job_id}")
    expect(page.locator("h1 .state")).to_have_text("pending_approval")

    csrf = page.locator("input[name=csrf_token]").first.input_value()
    digest = page.locator("input[name=digest]").first.input_value()
    replay = _post_approve(page, server.url, job_id, csrf_token=csrf, digest=digest)
    assert replay.status == 403 and "fresh proof" in replay.text()

    page.goto(f"{server.url}/approvals")
    card = page.locator(f'article.card[data-job-id="{job_id}"]')
    card.locator(".approve-form input[name=password]").fill(PASSWORD)
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator("#notice")).to_contain_text(f"Approved job {job_id}.")
    wait_state(page, server.url, job_id, "succeeded")
    assert len(server.outbox()) == 1


def test_a_passkey_confirms_changes_of_who_may_decide(local_page: Page, server: Server):
    page, base = local_page, f"http://localhost:{server.port}"
    page.goto(f"{base}/account")
    page.fill("input[name=label]", "first key")
    page.fill("#add-passkey input[name=password]", PASSWORD)
    page.get_by_role("button", name="Add a passkey").click()
    page.wait_for_url(f"{base}/account?done=added")

    # A token minted with the passkey (no password typed): an assertion bound to its name.
    page.goto(f"{base}/agents")
    page.fill("#agent-name", "build-bot")
    with page.expect_request(f"{base}/agents") as sent:
        page.get_by_role("button", name="Mint token").click()
    assert "passkey=" in (sent.value.post_data or "")
    expect(page.locator("#minted-token")).to_contain_text("aat_")

    # Another passkey, confirmed with this one: the assertion goes through (this virtual
    # authenticator then refuses to make a second credential for the same account).
    page.goto(f"{base}/account")
    page.fill("input[name=label]", "second key")
    with page.expect_response(f"{base}/account/passkeys/options") as asked:
        page.get_by_role("button", name="Add a passkey").click()
    assert asked.value.status == 200 and '"passkey"' in (asked.value.request.post_data or "")
    expect(page.locator("#passkey-error")).to_contain_text("already registered")

    # Removing it, confirmed with itself.
    page.goto(f"{base}/account")
    row = page.locator("table.passkeys tr", has_text="first key")
    with page.expect_request(lambda r: r.url.endswith("/remove")) as removed:
        row.get_by_role("button", name="Remove").click()
    assert "passkey=" in (removed.value.post_data or "")
    page.wait_for_url(f"{base}/account?done=removed")
    expect(page.locator("table.passkeys")).to_contain_text("No passkeys yet")
