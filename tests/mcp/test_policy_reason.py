"""The agent's reason and several approvers, seen from a real MCP SDK client (both eras):
the reason reaches the operator's card, and the pending answer counts the approvals left."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp_helpers import approve, body, connect
from platforms import platform_with

from dashboard.app import create_app
from webplatform.platform import Platform
from webplatform.store import operators
from webplatform.store.engine import session_scope
from webplatform.trust.authority import seal_for
from webplatform.trust.permissions import ROLE_BOOK

pytestmark = pytest.mark.anyio
BASE = "http://127.0.0.1:8000"
PASSWORD = "correct horse battery"

SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "weekly", "body": "hi"},
    "reason": "the user asked me to send the <b>weekly</b> summary to ops",
}


def _operators(platform: Platform, *names: str) -> None:
    seal = seal_for(platform)
    with session_scope(platform.engine) as session:
        for name in names:
            operators.add_operator(
                session=session, name=name, password=PASSWORD, seal=seal, roles=ROLE_BOOK
            )


async def test_the_reason_reaches_the_card_and_pending_counts_approvals(
    platform: Platform, era: str
) -> None:
    two = platform_with(platform.settings, approvals_required=2, approval_wait_s=0.5)
    _operators(two, "ada", "bob")
    async with connect(two, era) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "reason" in tools["run_tool_confirmed"].input_schema["properties"]
        assert "reason" in (tools["run_tool_confirmed"].description or "")
        first = body(await client.call_tool("run_tool_confirmed", SEND))
        assert first["status"] == "pending_approval" and first["approvals_needed"] == 2
        job_id = int(first["job"])

        app = create_app(two.settings, platform=two, embed_worker=False, mcp=False)
        with TestClient(app, base_url=BASE, follow_redirects=False) as browser:
            login = browser.post(
                "/login",
                data={"username": "ada", "password": PASSWORD, "next": "/"},
                headers={"Origin": BASE},
            )
            assert login.status_code == 303, login.text
            card = browser.get("/approvals").text
        assert "the user asked me to send the &lt;b&gt;weekly&lt;/b&gt; summary to ops" in card
        assert "0 of 2 approvals" in card

        approve(two, job_id, operator="ada")
        status: dict[str, Any] = body(await client.call_tool("job_status", {"job": job_id}))
        assert status["status"] == "pending_approval" and status["approvals_needed"] == 1
        assert "1 more operator(s) must approve" in status["next"]
    two.engine.dispose()


async def test_a_reason_of_ten_thousand_characters_is_invalid(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        result = await client.call_tool("run_tool_confirmed", {**SEND, "reason": "x" * 10_000})
    answer = body(result)
    assert result.is_error is True and answer["status"] == "invalid"
    assert "over the 500-character limit" in answer["error"]
