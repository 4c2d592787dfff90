"""The compact list of the approvals queue (SPEC §25) in headless Chromium against a real
`aat serve`, at a desktop (1280×800) and a phone (390×844) size: one line a call, ten on one
desktop screen, grouped by agent or by tool, the choice remembered by the browser, and each
call decided by opening its line, with the same step-up as its card."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_helpers import OPERATOR, PASSWORD, Server, job_state, wait_for_refresh
from playwright.sync_api import Browser, Page, expect
from stepup_helpers import preview_landed

from webplatform.config import Settings
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store.models import Surface

pytestmark = pytest.mark.browser

SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
# Who asks for what: six messages from build-bot, four outbox clean-ups from docs-bot.
CALLS = [("build-bot", "send-message")] * 6 + [("docs-bot", "delete-messages")] * 4


@pytest.fixture(params=sorted(SIZES))
def screen(request: pytest.FixtureRequest, chromium: Browser, server: Server) -> Iterator[Page]:
    """A browser at one of the two sizes, logged in as alice."""
    width, height = SIZES[request.param]
    phone = request.param == "phone"
    context = chromium.new_context(
        viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone
    )
    page = context.new_page()
    page.goto(f"{server.url}/login")
    page.fill("input[name=username]", OPERATOR)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{server.url}/")
    yield page
    context.close()


def _queue(server: Server) -> list[int]:
    """The ten calls of CALLS, queued as MCP clients would ask; their job ids, once each
    preview has landed (an approval binds the preview its card shows)."""
    platform = Platform(Settings(home=server.home))
    ids: list[int] = []
    try:
        for n, (client, action) in enumerate(CALLS):
            args = {"to": f"p{n}@example.org", "subject": f"s{n}", "body": "b"}
            answer = request_run(
                platform=platform,
                call=RunCall(
                    kind="tool",
                    name="outbox",
                    action=action,
                    args=args if action == "send-message" else {},
                ),
                actor=Actor(surface=Surface.mcp_http, client=client),
                consent=Consent.QUEUE,
            )
            assert answer.job is not None
            ids.append(answer.job)
        for job_id in ids:
            preview_landed(platform, job_id)
    finally:
        platform.engine.dispose()
    return ids


def test_the_compact_list_fits_ten_calls_groups_them_and_decides_with_a_step_up(
    screen: Page, server: Server
):
    ids = _queue(server)
    screen.goto(f"{server.url}/approvals")
    screen.get_by_role("link", name="Compact list").click()
    lines = screen.locator("article.card.compact")
    expect(lines).to_have_count(10)
    width, height = screen.viewport_size["width"], screen.viewport_size["height"]
    for job_id in ids:
        box = screen.locator(f"#card-{job_id}").bounding_box()
        assert box is not None and box["height"] <= 40, (job_id, box)  # one line a call
        assert box["x"] + box["width"] <= width + 1, box  # never wider than the screen
        if width >= 1280:
            assert box["y"] + box["height"] <= height, (job_id, box)  # ten on one screen

    # The browser remembers the choice: the page opened again is still the compact list.
    screen.goto(f"{server.url}/approvals")
    expect(lines).to_have_count(10)
    screen.get_by_role("link", name="By agent").click()
    groups = screen.locator("h3.queue-group")
    expect(groups).to_have_text(["asked by build-bot (6 waiting)", "asked by docs-bot (4 waiting)"])
    screen.get_by_role("link", name="By tool").click()
    expect(groups).to_have_text(
        ["outbox send-message (6 waiting)", "outbox delete-messages (4 waiting)"]
    )
    screen.goto(f"{server.url}/approvals")
    expect(groups).to_have_count(2)
    expect(lines).to_have_count(10)

    # Deciding: the line opens, stays open through the queue's refreshes, and Approve needs
    # the password as the card's does.
    used = ids[7]
    line = screen.locator(f"#line-{used}")
    line.locator("> summary").click()
    expect(line.locator(".approve-form")).to_be_visible()
    wait_for_refresh(screen, times=2)
    expect(line).to_have_attribute("open", "")
    line.locator(".approve-form input[name=password]").fill("not the password")
    line.get_by_role("button", name="Approve", exact=True).click()
    said = screen.locator(f"#card-{used} .card-outcome")
    expect(said).to_contain_text("wrong password")
    expect(said).to_be_in_viewport()
    assert job_state(screen, server.url, used) == "pending_approval"
    screen.goto(f"{server.url}/approvals")
    line.locator("> summary").click()
    line.locator(".approve-form input[name=password]").fill(PASSWORD)
    line.get_by_role("button", name="Approve", exact=True).click()
    expect(screen.locator(f"#outcome-{used}")).to_contain_text("approved by you")
    expect(screen.locator(f"#outcome-{used}")).to_be_in_viewport()
    expect(lines).to_have_count(9)
