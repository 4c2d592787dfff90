"""An upstream server's held tool definitions accepted on its dashboard page (SPEC §22), in
Chromium against a real `aat serve`: the admin reads the difference, types their password
and presses Accept; a viewer gets no button, and the form forged from their own page is
refused. What the store offers afterwards is what counts."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_helpers import OPERATOR, PASSWORD, Server, add_to_store, log_in, serve_env
from playwright.sync_api import Browser, expect
from serving import aat_serve, free_port

from webplatform import servers
from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.process import server_pool

pytestmark = pytest.mark.browser

UPSTREAM = Path(__file__).resolve().parents[1] / "servers" / "upstream.py"

# Run in the viewer's own page: the Accept form an admin's page carries, posted with the
# viewer's session cookie and CSRF token.
FORGED_ACCEPT = """async ([held, password]) => {
  const body = new URLSearchParams({
    csrf_token: document.querySelector('input[name="csrf_token"]').value,
    held: held, password: password});
  const r = await fetch("/servers/up/accept", {method: "POST", body: body});
  return r.status;
}"""


@pytest.fixture
def held_server(tmp_path: Path) -> Iterator[tuple[Server, Platform]]:
    """`aat serve` whose registry holds server `up`, its tools seen once (all held); alice
    an admin, vera a viewer."""
    root = tmp_path / "registry"
    (root / "servers" / "up").mkdir(parents=True)
    defs = tmp_path / "defs"
    defs.mkdir()
    (defs / "peek.txt").write_text("Show the token")
    (root / "servers" / "up" / "server.yaml").write_text(
        "name: up\ndescription: A small upstream server\n"
        f"command: [{sys.executable}, {UPSTREAM}, {defs / 'peek.txt'}]\n"
        f"reads: [{UPSTREAM.parent}, {defs}]\n"
    )
    home, port = tmp_path / "aat-home", free_port()
    add_to_store(home, [(OPERATOR, None), ("vera", "viewer")])
    platform = Platform(Settings(home=home, registry=str(root)))
    servers.refresh(platform, servers.find(platform, "up"), defs)
    server_pool.POOL.stop_all()
    env = {**serve_env(home, port), "AAT_REGISTRY": str(root)}
    log = tmp_path / "serve.log"
    try:
        with aat_serve(env=env, port=port, log=log) as url:
            yield Server(url=url, port=port, home=home, log=log, env=env), platform
    finally:
        platform.engine.dispose()


def offered(platform: Platform) -> list[str]:
    tool = platform.registry().tools.get("up")
    return sorted(a.name for a in tool.actions) if tool else []


def test_an_admin_accepts_held_tools_on_the_server_page(
    chromium: Browser, held_server: tuple[Server, Platform]
) -> None:
    server, platform = held_server
    page = log_in(chromium, server.url, OPERATOR)
    try:
        page.goto(f"{server.url}/servers/up")
        expect(page.locator('tr[data-state="held"]').first).to_be_visible()
        expect(page.locator('pre[data-held="peek"]')).to_contain_text("Show the token")
        page.get_by_label("Your password, to accept the held definitions shown above").fill(
            PASSWORD
        )
        page.get_by_role("button", name="Accept held tools").click()
        expect(page.get_by_role("status")).to_contain_text("Accepted")
        expect(page.locator('tr[data-state="held"]')).to_have_count(0)
        expect(page.locator('tr[data-state="accepted"]').first).to_be_visible()
    finally:
        page.context.close()
    assert "peek" in offered(platform) and "note" in offered(platform)
    events = [e for e in platform.audit.export(None) if e["event"] == "server-tools-accepted"]
    assert [e["actor"] for e in events] == [OPERATOR]


def test_a_viewer_gets_no_accept_and_a_forged_one_is_refused(
    chromium: Browser, held_server: tuple[Server, Platform]
) -> None:
    server, platform = held_server
    admin = log_in(chromium, server.url, OPERATOR)
    try:
        admin.goto(f"{server.url}/servers/up")
        held = admin.locator('input[name="held"]').get_attribute("value")
    finally:
        admin.context.close()
    viewer = log_in(chromium, server.url, "vera")
    try:
        viewer.goto(f"{server.url}/servers/up")
        expect(viewer.locator('tr[data-state="held"]').first).to_be_visible()
        expect(viewer.get_by_role("button", name="Accept held tools")).to_have_count(0)
        assert viewer.evaluate(FORGED_ACCEPT, [held, PASSWORD]) == 403
    finally:
        viewer.context.close()
    assert offered(platform) == []
