"""Deciding several calls at once in Chromium against a real `aat serve` (SPEC §16): ticks
that survive the queue's polling, Approve selected with one password or one passkey touch
(a virtual authenticator over DevTools' `WebAuthn` domain), and the edit form approved with a
passkey; all under the dashboard's strict CSP."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from browser_helpers import (
    OPERATOR,
    PASSWORD,
    Server,
    job_state,
    queue_directly,
    wait_for_refresh,
    wait_state,
)
from playwright.sync_api import Browser, CDPSession, Page, expect

pytestmark = pytest.mark.browser


def _watch_csp(page: Page) -> list[str]:
    """The console's CSP complaints, collected while the test runs (there must be none)."""
    seen: list[str] = []
    page.on(
        "console",
        lambda m: seen.append(m.text) if "Content Security Policy" in m.text else None,
    )
    return seen


@dataclass
class Key:
    """A page whose browser has a virtual authenticator, and how to ask DevTools about it."""

    page: Page
    cdp: CDPSession
    authenticator: str


@pytest.fixture
def with_key(chromium: Browser, server: Server) -> Iterator[Key]:
    """Alice at http://localhost:<port> (the passkeys' RP ID) with a passkey made on her
    account page by a virtual authenticator that verifies the user; and its DevTools session."""
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    options = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True}
    options |= {"hasUserVerification": True, "isUserVerified": True}
    made = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})
    base = f"http://localhost:{server.port}"
    page.goto(f"{base}/login")
    page.fill("input[name=username]", OPERATOR)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")
    page.goto(f"{base}/account")
    page.fill("input[name=label]", "virtual key")
    page.fill("#add-passkey input[name=password]", PASSWORD)
    page.get_by_role("button", name="Add a passkey").click()
    page.wait_for_url(f"{base}/account?done=added")
    yield Key(page=page, cdp=cdp, authenticator=str(made["authenticatorId"]))
    context.close()


def _tick(page: Page, ids: list[int]) -> None:
    for job_id in ids:
        page.locator(f"#pick-{job_id}").check()
    # Two polls of the live block later, the ticks are still there.
    wait_for_refresh(page, times=2)
    for job_id in ids:
        expect(page.locator(f"#pick-{job_id}")).to_be_checked()


def _expect_lines(page: Page, ids: list[int]) -> None:
    lines = page.locator("#notice ul.batch-outcome li")
    expect(lines).to_have_text([f"job {i}: approved" for i in ids])


def test_a_batch_of_three_approved_with_one_password(page: Page, server: Server) -> None:
    csp = _watch_csp(page)
    ids = [queue_directly(server, f"batch {n}") for n in range(3)]
    other = queue_directly(server, "left alone")
    page.goto(f"{server.url}/approvals")
    _tick(page, ids)
    page.get_by_role("button", name="Approve selected").click()
    expect(page.locator("#notice")).to_contain_text("approving the selected calls needs")
    page.fill("#batch-password", PASSWORD)
    page.get_by_role("button", name="Approve selected").click()
    _expect_lines(page, ids)
    expect(page.locator("#batch-password")).to_have_value("")
    for job_id in ids:
        wait_state(page, server.url, job_id, "succeeded")
    sent = sorted(json.loads(p.read_text())["subject"] for p in server.outbox())
    assert sent == ["batch 0", "batch 1", "batch 2"]
    page.goto(f"{server.url}/jobs/{ids[0]}")
    expect(page.locator("ol.timeline")).to_contain_text("step-up: password, one for 3 calls")
    assert page.locator("h1 .state").inner_text() == "succeeded"
    page.goto(f"{server.url}/approvals")
    expect(page.locator(f'article.card[data-job-id="{other}"]')).to_be_visible()
    assert csp == []


def test_a_batch_of_three_approved_with_one_passkey_touch(with_key: Key, server: Server) -> None:
    page = with_key.page
    csp = _watch_csp(page)
    base = f"http://localhost:{server.port}"
    ids = [queue_directly(server, f"touch {n}") for n in range(3)]
    page.goto(f"{base}/approvals")
    _tick(page, ids)
    before = _sign_count(with_key)
    with page.expect_request(f"{base}/approvals/approve") as sent:
        page.get_by_role("button", name="Approve selected").click()  # password left empty
    assert "passkey=" in (sent.value.post_data or "")
    _expect_lines(page, ids)
    assert _sign_count(with_key) == before + 1  # one touch for the three
    for job_id in ids:
        wait_state(page, base, job_id, "succeeded")
    assert len(server.outbox()) == 3
    page.goto(f"{base}/jobs/{ids[2]}")
    expect(page.locator("ol.timeline")).to_contain_text(
        re.compile(r"step-up: passkey \d+, one for 3 calls")
    )
    # Deny selected asks for no touch, as a single Deny; its reason reaches each job.
    denied = [queue_directly(server, f"no {n}") for n in range(2)]
    page.goto(f"{base}/approvals")
    _tick(page, denied)
    page.fill("#batch-reason", "not these")
    page.press("#batch-reason", "Enter")  # Deny selected, not the form's first button
    expect(page.locator("#notice ul.batch-outcome li")).to_have_text(
        [f"job {i}: denied" for i in denied]
    )
    assert _sign_count(with_key) == before + 1
    page.goto(f"{base}/jobs/{denied[0]}")
    expect(page.locator("h1 .state")).to_have_text("denied")
    expect(page.locator("body")).to_contain_text("not these")
    assert len(server.outbox()) == 3
    assert csp == []


def test_the_edit_form_approved_with_a_passkey(with_key: Key, server: Server) -> None:
    page = with_key.page
    csp = _watch_csp(page)
    base = f"http://localhost:{server.port}"
    job_id = queue_directly(server, "before the edit")
    page.goto(f"{base}/jobs/{job_id}/edit")
    form = page.locator("form.edit-form")
    form.locator("input[name=subject]").fill("after the edit")
    before = _sign_count(with_key)
    form.get_by_role("button", name="Approve edited").click()  # password left empty
    expect(page.locator(".notice.ok")).to_contain_text("Approved the edited call as job")
    assert _sign_count(with_key) == before + 1
    edited = int(page.url.split("/jobs/")[1].split("?")[0])
    wait_state(page, base, edited, "succeeded")
    expect(page.locator("ol.timeline")).to_contain_text("step-up: passkey")
    subjects = [json.loads(p.read_text())["subject"] for p in server.outbox()]
    assert subjects == ["after the edit"]
    assert job_state(page, base, job_id) == "denied"
    assert csp == []


def _sign_count(key: Key) -> int:
    """The signature counter of the virtual authenticator's one credential: one more per
    touch."""
    answer = key.cdp.send("WebAuthn.getCredentials", {"authenticatorId": key.authenticator})
    (credential,) = answer["credentials"]
    return int(credential["signCount"])


def test_the_batch_bar_and_the_boxes_fit_a_phone(chromium: Browser, server: Server) -> None:
    width = 390
    context = chromium.new_context(
        viewport={"width": width, "height": 844}, is_mobile=True, has_touch=True
    )
    page = context.new_page()
    page.goto(f"{server.url}/login")
    page.fill("input[name=username]", OPERATOR)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{server.url}/")
    job_id = queue_directly(server, "on a phone")
    page.goto(f"{server.url}/approvals")
    page.locator(f"#pick-{job_id}").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    tick = page.locator(f"label[for=pick-{job_id}]").bounding_box()
    assert tick is not None and tick["height"] >= 44 and tick["x"] + tick["width"] <= width
    # The bar shows once a call is ticked (SPEC §25).
    page.locator(f"label[for=pick-{job_id}]").tap()
    expect(page.locator(f"#pick-{job_id}")).to_be_checked()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for name in ("Approve selected", "Deny selected"):
        box = page.get_by_role("button", name=name).bounding_box()
        assert box is not None and box["height"] >= 44, name
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, name
    context.close()
