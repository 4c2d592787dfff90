"""The operator's cockpit (SPEC §25) in headless Chromium against a real `aat serve`, at a
desktop (1280×800) and a phone (390×844) size: what an operator sees after each decision,
how warnings look, and what the page says when the server cannot be reached."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_helpers import (
    OPERATOR,
    PASSWORD,
    Server,
    add_to_store,
    log_in,
    queue_directly,
    run_no_wait,
)
from playwright.sync_api import Browser, Page, expect
from serving import aat_serve

pytestmark = pytest.mark.browser

SIZES = {"desktop": (1280, 800), "phone": (390, 844)}


@pytest.fixture(params=sorted(SIZES))
def screen(request: pytest.FixtureRequest, chromium: Browser, server: Server) -> Iterator[Page]:
    """A browser at one of the two sizes, logged in as alice, on the approvals page."""
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


def _cards(page: Page, server: Server, count: int) -> list[int]:
    """`count` calls queued, and the approvals page showing their cards; their job ids."""
    ids = [queue_directly(server, subject=f"s{n}") for n in range(count)]
    page.goto(f"{server.url}/approvals")
    for job_id in ids:
        expect(page.locator(f"#card-{job_id}")).to_be_visible(timeout=15_000)
    return ids


def test_each_outcome_shows_on_the_card_used_and_focus_moves_on(screen: Page, server: Server):
    first, used, after = _cards(screen, server, 3)
    card = screen.locator(f"#card-{used}")
    card.scroll_into_view_if_needed()

    # A wrong password is said on the card, naming the job; focus goes back to the password.
    card.locator(".approve-form input[name=password]").fill("not the password")
    card.get_by_role("button", name="Approve", exact=True).click()
    said = card.locator(".card-outcome")
    expect(said).to_contain_text(f"job {used}")
    expect(said).to_contain_text("wrong password")
    expect(said).to_be_in_viewport()
    expect(screen.locator("#notice")).to_contain_text("wrong password")
    expect(screen.locator(f"#password-{used}")).to_be_focused()
    # It stays said through the queue's refreshes while the call still waits.
    screen.wait_for_timeout(2500)
    expect(said).to_contain_text("wrong password")

    # Approved: the card's place says so, naming the job, and focus is on the next card.
    card.locator(".approve-form input[name=password]").fill(PASSWORD)
    card.get_by_role("button", name="Approve", exact=True).click()
    done = screen.locator(f"#outcome-{used}")
    expect(done).to_contain_text(f"job {used}")
    expect(done).to_contain_text("approved by you")
    expect(done).to_be_in_viewport()
    expect(screen.locator("#notice")).to_contain_text(f"Approved job {used}.")
    expect(screen.locator(f"#card-{after}")).to_be_focused()

    # Denied: the same, and focus moves on to the card that is left.
    screen.locator(f"#card-{after}").get_by_role("button", name="Deny", exact=True).click()
    expect(screen.locator(f"#outcome-{after}")).to_contain_text("denied by you")
    expect(screen.locator(f"#outcome-{after}")).to_be_in_viewport()
    expect(screen.locator(f"#card-{first}")).to_be_focused()


def _look(page: Page, selector: str) -> dict[str, str]:
    """How the first element matching `selector` is drawn: its colours, bar and icon."""
    return dict(
        page.locator(selector).first.evaluate(
            """e => {
                const s = getComputedStyle(e), b = getComputedStyle(document.body);
                return {background: s.backgroundColor, body: b.backgroundColor,
                        color: s.color, text: b.color, bar: s.borderLeftWidth,
                        icon: getComputedStyle(e, '::before').content};
            }"""
        )
    )


def test_warnings_and_errors_look_like_warnings_not_body_text(page: Page, server: Server):
    job_id = queue_directly(server, subject="pay\u202eto")
    page.goto(f"{server.url}/approvals")
    card = page.locator(f"#card-{job_id}")
    expect(card.locator("p.warning")).to_contain_text("invisible or direction-changing")
    for selector, icon in ((f"#card-{job_id} p.warning", "⚠"),):
        look = _look(page, selector)
        assert look["background"] != look["body"], look
        assert look["color"] != look["text"], look
        assert look["bar"] == "5px", look
        assert icon in look["icon"] and "Warning" in look["icon"], look
    # A refused decision says so as an error, with its icon, not as plain text.
    card.locator(".approve-form input[name=password]").fill("not the password")
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(card.locator(".card-outcome.error")).to_contain_text("wrong password")
    for selector in (f"#card-{job_id} .card-outcome", "#notice .notice.error"):
        look = _look(page, selector)
        assert look["background"] != look["body"] and look["bar"] == "5px", look
        assert "✖" in look["icon"], look
    # A rule the form refuses: the Rules page's error is styled as one too.
    page.goto(f"{server.url}/rules")
    page.fill("#rules-text", "- effect: allow\n  tool: no-such-tool\n")
    page.fill("#rules-password", PASSWORD)
    page.get_by_role("button", name="Make the rules").click()
    expect(page.locator("p.error")).to_be_visible()
    look = _look(page, "p.error")
    assert look["background"] != look["body"] and "✖" in look["icon"], look


def test_every_page_shows_the_pending_count_in_its_title_and_favicon(page: Page, server: Server):
    page.goto(f"{server.url}/jobs")
    expect(page).to_have_title("Jobs · aat")
    icon = page.locator("link#favicon")
    plain = page.request.get(f"{server.url}/favicon.ico")  # no more 404
    assert plain.ok and plain.headers["content-type"].startswith("image/svg+xml")
    queue_directly(server)
    expect(page).to_have_title("(1) Jobs · aat", timeout=6_000)
    expect(icon).to_have_attribute("href", re.compile(r"favicon\.svg\?n=1$"))
    badge = page.request.get(f"{server.url}{icon.get_attribute('href')}")
    assert badge.ok and ">1</text>" in badge.text()
    expect(page.locator("#nav-pending")).to_have_text("1")


def test_a_stopped_server_is_said_and_its_buttons_wait_for_it(
    page: Page, server: Server, tmp_path: Path
):
    job_id = queue_directly(server)
    page.goto(f"{server.url}/approvals")
    approve = page.locator(f"#card-{job_id}").get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_enabled()
    banner = page.locator("#connection-lost")
    expect(banner).to_be_hidden()
    assert server.process is not None
    server.process.terminate()
    server.process.wait(timeout=30)
    expect(banner).to_be_visible(timeout=5_000)
    expect(banner).to_have_text(re.compile("Connection lost — retrying; nothing was approved"))
    expect(approve).to_be_disabled()
    # Back on the same port: the banner goes and the card can be decided again.
    with aat_serve(env=server.env, port=server.port, log=tmp_path / "again.log"):
        expect(banner).to_be_hidden(timeout=15_000)
        card = page.locator(f"#card-{job_id}")
        expect(card.get_by_role("button", name="Approve", exact=True)).to_be_enabled()
        card.locator(".approve-form input[name=password]").fill(PASSWORD)
        card.get_by_role("button", name="Approve", exact=True).click()
        expect(page.locator(f"#outcome-{job_id}")).to_contain_text("approved by you")


def test_a_long_call_reads_like_the_call_and_keeps_its_recipient(page: Page, server: Server):
    body = "Dear board,\n\n" + "The numbers are attached. " * 220 + "\n\nRegards"
    job_id = run_no_wait(
        server, "send-message", body=body, subject="Quarterly report", to="board@example.org"
    )
    assert len(body) > 5000
    page.goto(f"{server.url}/approvals")
    card = page.locator(f"#card-{job_id}")
    args = card.locator("dl.call-args")
    # The manifest's order, the short ones first: the recipient is on the card.
    expect(args.locator("dt")).to_have_text(["to", "subject", "delay-s", "body"])
    expect(args.locator('dd[data-arg="to"]')).to_have_text("board@example.org")
    # A string reads as its text, line breaks kept, no JSON quoting or \n.
    shown = args.locator('dd[data-arg="body"]').inner_text()
    assert shown.startswith("Dear board,\n\nThe numbers") and "\\n" not in shown
    expect(args.locator('dd[data-arg="body"]')).to_contain_text("more characters on the job page")
    expect(card.locator("p.warning")).to_contain_text("only the first 4000 are shown here")
    # The digest is folded away, and who asked reads as one line.
    expect(card.locator("code.digest")).to_be_hidden()
    card.locator("details.digest-fold summary").click()
    expect(card.locator("code.digest")).to_be_visible()
    expect(card.locator("dd.asked-by")).to_contain_text("with aat run")


def test_the_batch_bar_counts_what_is_ticked_and_says_who_decided_first(
    page: Page, server: Server, chromium: Browser
):
    add_to_store(server.home, [("bob", None)])
    ids = _cards(page, server, 3)
    bar = page.locator("#batch")
    expect(bar).to_be_hidden()  # nothing ticked, no bar
    page.locator(f"#pick-{ids[0]}").check()
    expect(bar).to_be_visible()
    expect(page.locator("#batch-count")).to_have_text("1 selected:")
    # The bar leaves the ticked card's header uncovered.
    header = page.locator(f"#card-{ids[0]} header")
    covered = header.evaluate(
        """h => { const r = h.getBoundingClientRect();
                  const at = document.elementFromPoint(r.left + 5, r.top + r.height / 2);
                  return !h.contains(at); }"""
    )
    assert not covered
    page.get_by_role("button", name="Select all 3").click()
    expect(page.locator("#batch-count")).to_have_text("3 selected:")
    page.get_by_role("button", name="Clear selection").click()
    expect(bar).to_be_hidden()

    # Ticked here, denied by bob in his own browser before alice presses.
    page.locator(f"#pick-{ids[1]}").check()
    page.locator(f"#pick-{ids[2]}").check()
    page.evaluate("document.activeElement.blur()")  # a tick in focus holds the refresh 15 s
    bob = log_in(chromium, server.url, "bob")
    bob.locator(f"#card-{ids[1]}").get_by_role("button", name="Deny", exact=True).click()
    expect(bob.locator("#notice")).to_contain_text(f"Denied job {ids[1]}.")
    bob.context.close()
    expect(page.locator(f"#outcome-{ids[1]}")).to_contain_text(
        "already decided by someone else: denied by bob"
    )
    page.fill("#batch-reason", "too late")
    page.get_by_role("button", name="Deny selected").click()
    expect(page.locator("#notice ul.batch-outcome li")).to_have_text(
        [
            f"job {ids[2]}: denied",
            f"job {ids[1]}: already decided by someone else (denied by bob), not decided",
        ]
    )


def test_keyboard_only_approval_with_the_skip_link_and_shortcuts(page: Page, server: Server):
    first, second, third = _cards(page, server, 3)
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to the first call")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(f"#card-{first}")).to_be_focused()
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#shortcuts")).to_be_hidden()
    page.keyboard.press("j")
    expect(page.locator(f"#card-{second}")).to_be_focused()
    page.keyboard.press("a")  # approving needs the password: its field first
    expect(page.locator(f"#password-{second}")).to_be_focused()
    page.keyboard.type("jjj")  # keys typed in a field are text, not shortcuts
    expect(page.locator(f"#password-{second}")).to_be_focused()
    page.locator(f"#password-{second}").fill("")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    expect(page.locator(f"#outcome-{second}")).to_contain_text("approved by you")
    expect(page.locator(f"#card-{third}")).to_be_focused()
    page.keyboard.press("d")
    expect(page.locator(f"#outcome-{third}")).to_contain_text("denied by you")
    expect(page.locator(f"#card-{first}")).to_be_focused()


def test_first_minutes_rules_in_full_and_dark(page: Page, server: Server):
    page.goto(f"{server.url}/approvals")
    expect(page.locator("p.empty").first).to_contain_text("aat run outbox send-message")
    # The Rules form suggests a rule, and submitting it untouched makes none.
    page.goto(f"{server.url}/rules")
    text = page.locator("#rules-text")
    expect(text).to_have_value("")
    expect(text).to_have_attribute("placeholder", re.compile("effect: allow"))
    # A rule limited to one recipient reads as limited where calls are decided.
    page.fill(
        "#rules-text",
        "- effect: allow\n  tool: outbox\n  action: send-message\n"
        '  args: {to: "board@example.org"}\n  expires_in: 1h\n',
    )
    page.fill("#rules-password", PASSWORD)
    page.get_by_role("button", name="Make the rules").click()
    expect(page.locator("table.rules tbody tr")).to_have_count(1)
    page.goto(f"{server.url}/approvals")
    expect(page.locator(".rules-in-force li")).to_contain_text(
        'allow outbox send-message, only when to: "board@example.org"'
    )
    # Dark when the system asks for it.
    page.emulate_media(color_scheme="dark")
    dark = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert dark == "rgb(20, 24, 28)", dark
