"""403 pages that name what was refused (SPEC §25), in headless Chromium against a real
`aat serve`: an approver made a viewer while her page was open presses Approve and is told,
on the card and in the notice, which permission was refused and who can grant it; a page she
may not open says the same as a page."""

from __future__ import annotations

import re

import pytest
from browser_helpers import PASSWORD, Server, add_to_store, job_state, log_in, queue_directly
from playwright.sync_api import Browser, expect

from webplatform.config import Settings
from webplatform.platform import Platform

pytestmark = pytest.mark.browser


def _make_viewer(server: Server, name: str) -> None:
    """Change `name`'s role to viewer, as an admin's `aat operator role` would."""
    platform = Platform(Settings(home=server.home))
    try:
        platform.operators.set_role(name, "viewer", actor="cli")
    finally:
        platform.engine.dispose()


def test_a_refused_decision_and_page_name_the_permission_and_who_grants_it(
    chromium: Browser, server: Server
):
    add_to_store(server.home, [("bo", "approver")])
    page = log_in(chromium, server.url, "bo")
    try:
        job_id = queue_directly(server, subject="refused")
        page.goto(f"{server.url}/approvals")
        card = page.locator(f"#card-{job_id}")
        expect(card).to_be_visible(timeout=15_000)
        _make_viewer(server, "bo")

        card.locator(".approve-form input[name=password]").fill(PASSWORD)
        card.get_by_role("button", name="Approve", exact=True).click()
        notice = page.locator("#notice .notice.error")
        expect(notice).to_contain_text("Refused: the approve permission (bo is a viewer")
        expect(notice).to_contain_text("who can grant it: alice (admin)")
        expect(notice).to_contain_text("aat operator role bo --role approver")
        # Said on the card used too, in view, and the page is still the approvals page.
        said = card.locator(".card-outcome.error")
        expect(said).to_contain_text("Refused: the approve permission (bo is a viewer")
        expect(said).to_be_in_viewport()
        expect(page.locator("h1")).to_have_text("Approvals")

        page.goto(f"{server.url}/rules")
        expect(page).to_have_title(re.compile(r"^(\(\d+\) )?Not allowed: make rules · aat$"))
        expect(page.locator("h1")).to_have_text("Not allowed: make rules")
        expect(page.locator("p.notice.error")).to_contain_text("who can grant it: alice (admin)")
        assert job_state(page, server.url, job_id) == "pending_approval"
    finally:
        page.context.close()
