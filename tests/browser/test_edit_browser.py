"""Edit, then approve, in a real browser against a real `aat serve`, while a real MCP client
over streamable HTTP waits on the call it asked for."""

from __future__ import annotations

import json
import re

import pytest
from browser_helpers import MESSAGE, PASSWORD, McpCall, Server, new_card
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

EDITED = {**MESSAGE, "subject": "Quarterly report (draft)", "body": "Numbers to follow."}


def test_edit_then_approve_from_the_card_sends_one_edited_message(page: Page, server: Server):
    call = McpCall(server, MESSAGE)
    call.start()
    card, job_id = new_card(page)
    card.get_by_role("button", name="Edit", exact=True).click()
    page.wait_for_url(re.compile(rf"/jobs/{job_id}/edit\??$"))
    form = page.locator("form.edit-form")
    # One input per argument, named after it, holding the call's current value.
    expect(form.locator("input[name=subject]")).to_have_value(MESSAGE["subject"])
    expect(form.locator("input[name=to]")).to_have_value(MESSAGE["to"])
    form.locator("input[name=subject]").fill(EDITED["subject"])
    form.locator("input[name=body]").fill(EDITED["body"])
    form.locator("input[name=_password]").fill(PASSWORD)
    form.get_by_role("button", name="Approve edited").click()
    expect(page.locator(".notice.ok")).to_contain_text("Approved the edited call as job")
    edited_id = int(page.url.split("/jobs/")[1].split("?")[0])
    expect(page.locator("a.edited-from")).to_have_text(f"job {job_id}")

    answer = call.answer()
    assert answer["status"] == "succeeded", answer
    assert answer["job"] == edited_id and answer["edited_from"] == job_id
    assert answer["args"] == {**EDITED, "delay-s": 0}  # the call as it runs: defaults filled in
    sent = [json.loads(p.read_text()) for p in server.outbox()]
    assert [(m["to"], m["subject"], m["body"]) for m in sent] == [tuple(EDITED.values())]

    page.goto(f"{server.url}/jobs/{job_id}")
    expect(page.locator("h1 .state")).to_have_text("denied")
    expect(page.locator("a.edited-into")).to_have_text(f"job {edited_id}")
    expect(page.locator("dl.facts")).to_contain_text("edited by alice")
    # Only the edited job ran, once; nothing is left to run and the server stopped: exactly
    # one message, the edited one, for good, and never the original.
    assert server.settle() == {edited_id: 1}
    sent = [json.loads(p.read_text()) for p in server.outbox()]
    assert [(m["to"], m["subject"], m["body"]) for m in sent] == [tuple(EDITED.values())]
