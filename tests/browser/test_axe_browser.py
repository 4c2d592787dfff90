"""axe-core (pinned in tests/browser/axe, from npm) run inside Chromium on the dashboard's
main pages, at a desktop and a phone size, in light and dark: no violations (SPEC §25)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import urlencode

import pytest
from browser_helpers import Server, add_to_store, log_in, queue_directly
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.browser

AXE_DIR = Path(__file__).resolve().parent / "axe"
AXE = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
PAGES = ("/", "/approvals", "/jobs", "/registry", "/skills", "/agents", "/rules", "/account")


@pytest.fixture(scope="module")
def axe_source() -> str:
    """axe-core's script, installed from the lock file when it is not there yet."""
    if not AXE.exists():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=AXE_DIR,
            check=True,
            timeout=300,
        )
    return AXE.read_text()


def _violations(page: Page, source: str) -> list[str]:
    # Injected through the DevTools protocol (add_script_tag would be refused by the CSP).
    page.evaluate(source)
    found = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
             .map(v => `${v.id} (${v.nodes.length}): ${v.nodes.slice(0, 3)
                 .map(n => n.target.join(' ')).join(' | ')}`)"""
    )
    return list(found)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_main_pages_have_no_axe_violations(
    page: Page, server: Server, axe_source: str, scheme: str
) -> None:
    job_id = queue_directly(server)
    page.emulate_media(color_scheme="dark" if scheme == "dark" else "light")
    problems: dict[str, list[str]] = {}
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        for path in (*PAGES, f"/jobs/{job_id}"):
            page.goto(f"{server.url}{path}")
            if found := _violations(page, axe_source):
                problems[f"{path} at {width} px"] = found
    assert problems == {}, "\n".join(f"{k}: {v}" for k, v in problems.items())


def _look(page: Page, name: str) -> dict[str, str]:
    """How the button named `name` is drawn: its fill, the page's, and its weight."""
    return dict(
        page.get_by_role("button", name=name, exact=True).evaluate(
            """e => { const s = getComputedStyle(e);
                      return {fill: s.backgroundColor, page: getComputedStyle(document.body)
                              .backgroundColor, weight: s.fontWeight}; }"""
        )
    )


def _consent_page(page: Page, server: Server) -> None:
    """An agent's sign-in request, as its client's browser lands on it (SPEC §18)."""
    redirect = "http://127.0.0.1:9/callback"
    client = page.request.post(
        f"{server.url}/register", data={"redirect_uris": [redirect], "client_name": "axe client"}
    )
    assert client.status == 201, client.text()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client.json()["client_id"],
            "redirect_uri": redirect,
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "code_challenge_method": "S256",
            "state": "st",
            "resource": f"{server.url}/mcp",
        }
    )
    page.goto(f"{server.url}/authorize?{query}")
    expect(page.locator("h1")).to_have_text("Let an agent sign in")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_log_in_and_allow_are_the_primary_buttons_and_their_pages_are_axe_clean(
    page: Page, server: Server, axe_source: str, scheme: str
) -> None:
    page.emulate_media(color_scheme=scheme)
    _consent_page(page, server)
    allow, deny = _look(page, "Allow"), _look(page, "Deny")
    # Allow is the filled, heavier button; Deny beside it is an outline.
    assert allow["fill"] not in (allow["page"], "rgba(0, 0, 0, 0)"), allow
    assert int(allow["weight"]) >= 600 and deny["fill"] == "rgba(0, 0, 0, 0)", (allow, deny)
    problems: dict[str, list[str]] = {}
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        if found := _violations(page, axe_source):
            problems[f"consent at {width} px"] = found
    page.context.clear_cookies()
    page.goto(f"{server.url}/login")
    log_in = _look(page, "Log in")
    assert log_in["fill"] not in (log_in["page"], "rgba(0, 0, 0, 0)"), log_in
    assert int(log_in["weight"]) >= 600, log_in
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        if found := _violations(page, axe_source):
            problems[f"/login at {width} px"] = found
    assert problems == {}, "\n".join(f"{k}: {v}" for k, v in problems.items())


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_compact_grouped_queue_has_no_axe_violations(
    page: Page, server: Server, axe_source: str, scheme: str
) -> None:
    first = queue_directly(server, subject="one")
    queue_directly(server, subject="two")
    page.emulate_media(color_scheme=scheme)
    problems: dict[str, list[str]] = {}
    for layout in ("view=compact&group=agent", "view=compact&group=tool", "view=cards&group=tool"):
        page.goto(f"{server.url}/approvals?{layout}")
        for width, height in ((1280, 800), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            if found := _violations(page, axe_source):
                problems[f"{layout} at {width} px"] = found
            if layout.startswith("view=compact"):
                page.locator(f"#line-{first} > summary").click()
                expect(page.locator(f"#line-{first}")).to_have_attribute("open", "")
                if found := _violations(page, axe_source):
                    problems[f"{layout}, a line open, at {width} px"] = found
                page.locator(f"#line-{first} > summary").click()
    assert problems == {}, "\n".join(f"{k}: {v}" for k, v in problems.items())


def test_the_refused_page_has_no_axe_violations(
    chromium: Browser, server: Server, axe_source: str
) -> None:
    add_to_store(server.home, [("bo", "approver")])
    page = log_in(chromium, server.url, "bo")
    problems: dict[str, list[str]] = {}
    try:
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.goto(f"{server.url}/rules")
            expect(page.locator("h1")).to_have_text("Not allowed: make rules")
            for width, height in ((1280, 800), (390, 844)):
                page.set_viewport_size({"width": width, "height": height})
                if found := _violations(page, axe_source):
                    problems[f"/rules refused, {scheme}, at {width} px"] = found
    finally:
        page.context.close()
    assert problems == {}, "\n".join(f"{k}: {v}" for k, v in problems.items())
