"""Approval policy (SPEC §11) as operators meet it in Chromium, against a real `aat serve`:
two approvers, a viewer, no self-approval for the agent token's owner, and the agent's reason.
Each test checks what the pages show and what actually ran (the outbox tool's messages).

The rules themselves are tested over HTTP in tests/dashboard/test_policy.py; these prove the
pages: which buttons each operator gets, the lines saying why not, refusals shown in place,
and that forging the missing button from the page's own session changes nothing.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    PASSWORD,
    McpCall,
    Server,
    add_to_store,
    job_state,
    log_in,
    queue_directly,
    serve_env,
    wait_state,
)
from playwright.sync_api import Browser, Locator, Page, expect
from serving import aat_serve, free_port

from webplatform.config import EXAMPLES_ROOT

pytestmark = pytest.mark.browser

MESSAGE = {"to": "bob@example.org", "subject": "Board minutes", "body": "Attached."}

# Sent by the page's own script with the session cookie and the page's CSRF token: the
# request a viewer (or the asker) would forge to press the Approve button they were not given.
FORGE = """async ([job, verb, password]) => {
  const form = new URLSearchParams({
    csrf_token: document.querySelector('input[name="csrf_token"]').value,
    digest: document.querySelector(`#card-${job} code.digest, code.digest`).textContent.trim(),
    password: password,
    return_to: "job",
    reason: "forged",
  });
  const r = await fetch(`/jobs/${job}/${verb}`, {method: "POST", body: form});
  return [r.status, await r.text()];
}"""

Start = Callable[..., tuple[Server, dict[str, str]]]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """`start(operators=[(name, role), ...], manifest="approvals: 2", agents={name: owner})`:
    `aat serve` on a registry holding the example outbox tool, whose `send-message` action
    gets the `manifest` lines; the operators (password PASSWORD) and agent tokens are added
    first. Returns the server and the agents' tokens by name."""
    with ExitStack() as stack:

        def start(
            *,
            operators: list[tuple[str, str]],
            manifest: str = "",
            agents: dict[str, str] | None = None,
        ) -> tuple[Server, dict[str, str]]:
            home, port = tmp_path / "aat-home", free_port()
            registry = tmp_path / "registry"
            outbox = registry / "tools" / "outbox"
            shutil.copytree(EXAMPLES_ROOT / "tools" / "outbox", outbox)
            manifest_file = outbox / "tool.yaml"
            text = manifest_file.read_text()
            anchor = "    timeout_s: 120\n"  # in send-message, the only action with it
            assert text.count(anchor) == 1
            extra = "".join(f"    {line.strip()}\n" for line in manifest.splitlines())
            manifest_file.write_text(text.replace(anchor, anchor + extra))
            # The agent's call answers `pending_approval` after 1 s; the job waits on.
            env = {**serve_env(home, port), "AAT_REGISTRY": str(registry)}
            env["AAT_APPROVAL_WAIT_S"] = "1"
            tokens = add_to_store(home, list(operators), agents)
            log = tmp_path / "serve.log"
            url = stack.enter_context(aat_serve(env=env, port=port, log=log))
            return Server(url=url, port=port, home=home, log=log, env=env), tokens

        yield start


@pytest.fixture
def pages(chromium: Browser) -> Iterator[Callable[[Server, str], Page]]:
    """`as_(server, name)`: a page in a browser context of its own, logged in as `name`."""
    opened: list[Page] = []

    def as_(server: Server, name: str) -> Page:
        opened.append(log_in(chromium, server.url, name))
        return opened[-1]

    yield as_
    for page in opened:
        page.context.close()


def _card(page: Page, job_id: int) -> Locator:
    card = page.locator(f'article.card[data-job-id="{job_id}"]')
    expect(card).to_be_visible()
    return card


def _approve_in_card(page: Page, job_id: int) -> None:
    card = _card(page, job_id)
    card.locator(".approve-form input[name=password]").fill(PASSWORD)
    card.get_by_role("button", name="Approve", exact=True).click()


def _no_buttons(scope: Locator, *names: str) -> None:
    for name in names:
        expect(scope.get_by_role("button", name=name, exact=True)).to_have_count(0)


def test_two_operators_approve_and_the_job_runs_once_the_same_one_twice_is_refused(
    start: Start, pages: Callable[[Server, str], Page]
) -> None:
    server, _ = start(operators=[("alice", "admin"), ("bob", "approver")], manifest="approvals: 2")
    job_id = queue_directly(server, subject="needs two")
    alice = pages(server, "alice")
    expect(_card(alice, job_id).locator("p.approvals")).to_have_text("0 of 2 approvals")
    # A second tab of alice's, opened on the job page before she approves anywhere.
    stale = alice.context.new_page()
    stale.goto(f"{server.url}/jobs/{job_id}")
    expect(stale.get_by_role("button", name="Approve", exact=True)).to_be_visible()

    _approve_in_card(alice, job_id)
    expect(alice.locator("#notice")).to_contain_text(
        f"Your approval is recorded; it waits for more approvals: job {job_id}."
    )
    card = _card(alice, job_id)
    expect(card.locator("p.approvals")).to_have_text("1 of 2 approvals (approved by alice)")
    expect(card.locator("p.why-no-approve")).to_have_text(
        "You approved this call; it waits for 1 more approval(s) from others."
    )
    _no_buttons(card, "Approve")

    # Her stale tab still has the button: pressing it again is refused on the page.
    stale.locator(".approve-form input[name=password]").fill(PASSWORD)
    with stale.expect_response(f"{server.url}/jobs/{job_id}/approve") as refused:
        stale.get_by_role("button", name="Approve", exact=True).click()
    assert refused.value.status == 409
    expect(stale.locator("p.notice.error")).to_have_text(
        f"you already approved job {job_id}; it needs 1 more approval(s) from other operators"
    )
    assert job_state(stale, server.url, job_id) == "pending_approval"
    expect(stale.locator("p.approvals")).to_have_text("1 of 2 approvals (approved by alice)")
    assert server.outbox() == []

    bob = pages(server, "bob")
    expect(_card(bob, job_id).locator("p.approvals")).to_have_text(
        "1 of 2 approvals (approved by alice)"
    )
    _approve_in_card(bob, job_id)
    expect(bob.locator("#notice")).to_contain_text(f"Approved job {job_id}.")
    wait_state(bob, server.url, job_id, "succeeded")
    expect(bob.locator("dl")).to_contain_text("alice, bob")
    assert len(server.outbox()) == 1
    assert "needs two" in server.outbox()[0].read_text()


def test_a_viewer_sees_no_buttons_and_a_forged_post_from_their_page_is_refused(
    start: Start, pages: Callable[[Server, str], Page]
) -> None:
    server, _ = start(operators=[("alice", "admin"), ("vic", "viewer")])
    job_id = queue_directly(server, subject="viewer sees this")
    vic = pages(server, "vic")
    card = _card(vic, job_id)
    expect(card).to_contain_text("viewer sees this")
    expect(card.locator("p.why-no-approve")).to_have_text(
        "You are a viewer: you see every call and decide none."
    )
    _no_buttons(card, "Approve", "Deny")
    vic.goto(f"{server.url}/jobs/{job_id}")
    _no_buttons(vic.locator("main"), "Approve", "Deny", "Re-run")
    expect(vic.locator("p.why-no-approve")).to_be_visible()

    # The viewer's own session and CSRF token, from the page's own script: refused.
    vic.goto(f"{server.url}/approvals")
    _card(vic, job_id)
    for verb in ("approve", "deny"):
        status, text = vic.evaluate(FORGE, [job_id, verb, PASSWORD])
        assert status == 403, text
        assert "vic is a viewer: viewers see every call and decide or run none" in text
    assert job_state(vic, server.url, job_id) == "pending_approval"
    assert server.outbox() == []


def test_the_token_owner_gets_no_approve_button_and_another_operator_approves(
    start: Start, pages: Callable[[Server, str], Page]
) -> None:
    server, tokens = start(
        operators=[("alice", "admin"), ("bob", "approver")],
        manifest="self_approval: false",
        agents={"alice-laptop": "alice"},
    )
    call = McpCall(server, MESSAGE, token=tokens["alice-laptop"])
    call.start()
    asked = call.answer()
    assert asked["status"] == "pending_approval", asked
    job_id = int(asked["job"])

    alice = pages(server, "alice")
    card = _card(alice, job_id)
    expect(card).to_contain_text("alice-laptop")
    expect(card.locator("p.why-no-approve")).to_have_text(
        "You asked for this call, and it may not be approved by the operator who asked: "
        "another operator must approve it."
    )
    _no_buttons(card, "Approve")
    expect(card.get_by_role("button", name="Deny", exact=True)).to_be_visible()
    status, text = alice.evaluate(FORGE, [job_id, "approve", PASSWORD])
    assert status == 403, text
    assert "may not be approved by the operator who asked" in text
    assert job_state(alice, server.url, job_id) == "pending_approval"
    expect(alice.locator("p.why-no-approve")).to_contain_text("You asked for this call")
    assert server.outbox() == []

    bob = pages(server, "bob")
    _approve_in_card(bob, job_id)
    expect(bob.locator("#notice")).to_contain_text(f"Approved job {job_id}.")
    wait_state(bob, server.url, job_id, "succeeded")
    assert len(server.outbox()) == 1


REASON = (
    '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    " send the minutes\x1b[2J now\u202e please"
)
# The same text as the page must show it: literal markup, controls written out as \uXXXX.
SHOWN = (
    '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    " send the minutes\\u001b[2J now\\u202e please"
)


def _shows_the_reason_as_text(page: Page) -> None:
    reason = page.locator("dd.agent-reason")
    expect(reason).to_have_text(SHOWN)
    expect(reason.locator("img, script")).to_have_count(0)
    expect(page.get_by_role("alert").filter(has_text="direction-changing")).to_be_visible()
    assert page.evaluate("window.pwned") is None


def test_the_agents_reason_is_shown_as_text_and_runs_nothing(
    start: Start, pages: Callable[[Server, str], Page]
) -> None:
    server, _ = start(operators=[("alice", "admin")])
    call = McpCall(server, MESSAGE, reason=REASON)
    call.start()
    asked: dict[str, Any] = call.answer()
    assert asked["status"] == "pending_approval", asked
    job_id = int(asked["job"])

    alice = pages(server, "alice")
    _card(alice, job_id)
    _shows_the_reason_as_text(alice)
    # htmx swaps the queue in every second: the swapped-in card is escaped too.
    alice.evaluate("document.querySelector('dd.agent-reason').dataset.seen = 'yes'")
    expect(alice.locator("dd.agent-reason[data-seen]")).to_have_count(0)
    _shows_the_reason_as_text(alice)
    alice.goto(f"{server.url}/jobs/{job_id}")
    _shows_the_reason_as_text(alice)

    alice.goto(f"{server.url}/approvals")
    _approve_in_card(alice, job_id)
    wait_state(alice, server.url, job_id, "succeeded")
    _shows_the_reason_as_text(alice)
    assert len(server.outbox()) == 1
