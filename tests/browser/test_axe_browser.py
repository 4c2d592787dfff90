"""axe-core (pinned in tests/browser/axe, from npm) run inside Chromium on the dashboard's
main pages, at a desktop and a phone size, in light and dark: no violations (SPEC §25)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from browser_helpers import Server, queue_directly
from playwright.sync_api import Page

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
