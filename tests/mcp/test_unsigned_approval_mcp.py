"""`job_status` never answers "approved by NAME" for an approval no valid signature covers
(SPEC §20): a row moved to `approved` by SQL reads "marked approved in the database, without a
valid signature" until a worker fails it, while a real approval still names its operator."""

from __future__ import annotations

import json

import pytest
from mcp_helpers import approve, body, connect
from sqlalchemy import text

from webplatform.platform import Platform
from webplatform.trust.claims import UNSIGNED_APPROVAL

pytestmark = pytest.mark.anyio

SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "please send", "body": "hi"},
}


def forge(platform: Platform, job_id: int, name: str) -> None:
    """What anyone who can write the database can do: no operator, no key."""
    with platform.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE job SET state = 'approved', decided_by = :name, decided_at = created_at "
                "WHERE id = :id"
            ),
            {"name": name, "id": job_id},
        )


async def test_job_status_names_no_approver_of_a_forged_approval(
    platform: Platform, era: str
) -> None:
    async with connect(platform, era) as client:
        forged = body(await client.call_tool("run_tool_confirmed", SEND))
        genuine = body(await client.call_tool("run_tool_confirmed", SEND))
        assert forged["status"] == genuine["status"] == "pending_approval"
        forge(platform, forged["job"], "alice")
        approve(platform, genuine["job"], operator="olga")
        forged_status = body(await client.call_tool("job_status", {"job": forged["job"]}))
        genuine_status = body(await client.call_tool("job_status", {"job": genuine["job"]}))
    # A real approval still says who gave it: the check hides only what does not verify.
    assert genuine_status["status"] == "approved" and genuine_status["decided_by"] == "olga"
    assert "warning" not in genuine_status
    assert forged_status["status"] == "approved"
    assert "decided_by" not in forged_status
    assert "alice" not in json.dumps(forged_status)
    assert UNSIGNED_APPROVAL in forged_status["warning"]
