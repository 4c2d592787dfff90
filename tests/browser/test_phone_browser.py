"""The approvals and job pages on a 390×844 phone screen, in headless Chromium: nothing
scrolls sideways, arguments wrap, and Approve, Deny and the password field are big enough
to tap and inside the screen."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import MESSAGE, OPERATOR, PASSWORD, McpCall, Server, new_card, queue_directly
from playwright.sync_api import Browser, Locator, Page

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "approvals-phone.png"
WIDTH, HEIGHT = 390, 844
TAP_PX = 44
# One unbroken 300-character word: the hardest thing to fit.
LONG_SUBJECT = "quarterly-report-" + "x" * 283


@pytest.fixture
def phone(chromium: Browser, server: Server, tmp_path: Path) -> Iterator[Page]:
    """A phone-sized touch browser, logged in as alice."""
    context = chromium.new_context(
        viewport={"width": WIDTH, "height": HEIGHT},
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
    )
    pg = context.new_page()
    pg.goto(f"{server.url}/login")
    pg.fill("input[name=username]", OPERATOR)
    pg.fill("input[name=password]", PASSWORD)
    pg.get_by_role("button", name="Log in").click()
    pg.wait_for_url(f"{server.url}/")
    yield pg
    pg.screenshot(path=str(tmp_path / "phone.png"))
    context.close()


def wide(page: Page) -> list[str]:
    """The elements that reach past the screen's right edge (for the failure message)."""
    return list(
        page.evaluate(
            """w => [...document.querySelectorAll('*')]
                .filter(e => e.getBoundingClientRect().right > w || e.scrollWidth > w)
                .map(e => `${e.tagName}.${e.className}: ${e.scrollWidth} px`)
                .slice(0, 12)""",
            WIDTH,
        )
    )


def assert_fits_and_tappable(page: Page, scope: str) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"the page is {width} px wide on a {WIDTH} px screen: {wide(page)}"
    for name in ("Approve", "Deny"):
        button = page.locator(scope).get_by_role("button", name=name, exact=True)
        assert button.is_visible()
        box = button.bounding_box()
        assert box is not None
        assert box["height"] >= TAP_PX, f"{name} is {box['height']} px tall"
        assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH, f"{name} is off screen"
    password = page.locator(f"{scope} .approve-form input[name=password]").bounding_box()
    assert password is not None and password["height"] >= TAP_PX
    assert password["x"] + password["width"] <= WIDTH
    args = _box(page.locator(f"{scope} dl.call-args, {scope} pre.args, pre.args").first)
    assert args is not None and args["x"] + args["width"] <= WIDTH


def _box(locator: Locator) -> Any:
    """The element's box, measured again if the queue's refresh swapped the card meanwhile
    (a swapped-out element has no box)."""
    for _ in range(50):
        locator.wait_for(state="visible")
        box = locator.bounding_box()
        if box is not None:
            return box
        time.sleep(0.1)
    return None


def test_the_approvals_page_fits_a_phone(phone: Page, server: Server) -> None:
    job_id = queue_directly(server, subject=LONG_SUBJECT)
    phone.goto(f"{server.url}/approvals")
    card = f"#card-{job_id}"
    phone.locator(card).wait_for()
    assert LONG_SUBJECT in phone.locator(f"{card} dl.call-args").inner_text().replace("\n", "")
    assert_fits_and_tappable(phone, card)


def test_the_job_page_fits_a_phone(phone: Page, server: Server) -> None:
    job_id = queue_directly(server, subject=LONG_SUBJECT)
    phone.goto(f"{server.url}/jobs/{job_id}")
    assert_fits_and_tappable(phone, "section.pending")
    header = phone.locator("h1").bounding_box()
    assert header is not None and header["x"] + header["width"] <= WIDTH


def test_an_agents_request_fits_a_phone(phone: Page, server: Server, tmp_path: Path) -> None:
    """What the README shows: an MCP agent's request, with its reason, on a phone."""
    call = McpCall(server, MESSAGE, reason="The board asked for the numbers before Friday.")
    call.start()
    phone.goto(f"{server.url}/approvals")
    card, job_id = new_card(phone)
    assert "before Friday" in card.inner_text()
    assert_fits_and_tappable(phone, f"#card-{job_id}")
    # The README's screenshot is refreshed only on request, so a test run leaves the tree clean.
    shot = SCREENSHOT if os.environ.get("AAT_UPDATE_SCREENSHOTS") == "1" else tmp_path / "p.png"
    card.screenshot(path=str(shot))  # the whole card: reason, arguments and buttons
    assert shot.stat().st_size > 0
    card.get_by_role("button", name="Deny", exact=True).click()
    assert call.answer()["status"] == "denied"
