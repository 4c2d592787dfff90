"""The optional sound on a new pending call (SPEC §25), in headless Chromium against a real
`aat serve`: off by default, turned on and off by a toggle the browser remembers, heard on any
page. What headless Chromium can show is counted: the Web Audio tones the page makes (none, and
no audio context at all, while the sound is off) and the console's audio complaints."""

from __future__ import annotations

import re

import pytest
from browser_helpers import Server, queue_directly
from playwright.sync_api import ConsoleMessage, Page, expect

pytestmark = pytest.mark.browser

# Counts every audio context and tone the page makes, through the real Web Audio API.
COUNT_AUDIO = """
window.__audio = {contexts: 0, tones: 0};
const Real = window.AudioContext;
window.AudioContext = class extends Real {
  constructor(...args) { super(...args); window.__audio.contexts++; }
  createOscillator() { window.__audio.tones++; return super.createOscillator(); }
};
"""


def _audio(page: Page) -> dict[str, int]:
    return dict(page.evaluate("() => window.__audio"))


def _arrives(page: Page, server: Server, count: int) -> None:
    """Queue one call and wait until the page's pulse has seen it (the title says `count`)."""
    queue_directly(server)
    expect(page).to_have_title(re.compile(rf"^\({count}\) Jobs · aat$"), timeout=10_000)


def test_the_sound_is_off_by_default_remembered_and_plays_on_any_page(
    page: Page, server: Server
) -> None:
    complaints: list[str] = []

    def heard(message: ConsoleMessage) -> None:
        if re.search(r"audio|autoplay", message.text, re.IGNORECASE):
            complaints.append(message.text)

    page.on("console", heard)
    page.context.add_init_script(COUNT_AUDIO)
    page.goto(f"{server.url}/approvals")
    toggle = page.locator("#sound-toggle")
    expect(toggle).to_have_text("Sound on new calls: off")
    expect(toggle).to_have_attribute("aria-pressed", "false")

    # Off: a new call on another page makes no sound, no audio context, no complaint.
    page.goto(f"{server.url}/jobs")
    _arrives(page, server, 1)
    assert _audio(page) == {"contexts": 0, "tones": 0}
    assert complaints == []

    # On, and remembered by the browser: a new call on the jobs page plays a tone.
    page.goto(f"{server.url}/approvals")
    toggle.click()
    expect(toggle).to_have_text("Sound on new calls: on")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    page.reload()
    expect(toggle).to_have_text("Sound on new calls: on")
    page.goto(f"{server.url}/jobs")
    page.locator("h1").click()  # the operator's first press on this page lets audio start
    _arrives(page, server, 2)
    page.wait_for_function("() => window.__audio.tones === 1", timeout=10_000)

    # Off again: the next call is silent.
    page.goto(f"{server.url}/approvals")
    toggle.click()
    expect(toggle).to_have_text("Sound on new calls: off")
    page.goto(f"{server.url}/jobs")
    _arrives(page, server, 3)
    assert _audio(page) == {"contexts": 0, "tones": 0}
