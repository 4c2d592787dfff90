"""Edit, then approve, as the waiting agent sees it: the SDK client's `run_tool_confirmed`
call on the original gets the edited job's outcome, with `edited_from` and the arguments
that ran, in both protocol eras, holding plainly or through URL elicitation."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest
from mcp.client.context import ClientRequestContext
from mcp_helpers import body, connect, later, later_when
from mcp_types import ElicitRequestParams, ElicitResult
from platforms import platform_with

from webplatform.jobs import edits
from webplatform.jobs.tracking import pending_for
from webplatform.platform import Platform
from webplatform.trust.stepup import StepUp, StepUpMethod
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio

SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "as asked", "body": "hi"},
}
EDITED = {"to": "ops@example.org", "subject": "as edited", "body": "hello, edited"}


def edit_first_pending(platform: Platform, operator: str = "olga") -> None:
    """Edit the first waiting job into EDITED and approve it, as the dashboard's Edit form
    does after the operator's password step-up."""
    deadline = time.monotonic() + 30
    while not (waiting := pending_for(platform=platform)) and time.monotonic() < deadline:
        time.sleep(0.05)
    edit = edits.prepare(platform=platform, job_id=int(waiting[0]["job"]), args=EDITED)
    step_up = StepUp(operator=operator, digest=edit.digest, method=StepUpMethod.password)
    edits.approve_edited(
        platform=platform, edit=edit, operator=operator, address=None, step_up=step_up
    )


def sent(platform: Platform) -> list[dict[str, Any]]:
    folder = platform.settings.home / "outbox"
    files = sorted(folder.iterdir()) if folder.exists() else []
    return [json.loads(p.read_text()) for p in files]


def check_edited_outcome(platform: Platform, answer: dict[str, Any]) -> None:
    assert answer["status"] == "succeeded", answer
    assert answer["args"] == {**EDITED, "delay-s": 0}  # the default filled in, as it ran
    original = answer["edited_from"]
    assert isinstance(original, int) and original != answer["job"]
    assert [(m["subject"], m["body"]) for m in sent(platform)] == [("as edited", "hello, edited")]


async def test_the_waiting_call_gets_the_edited_jobs_outcome(
    platform: Platform, worker: Worker, era: str
) -> None:
    del worker
    slow = platform_with(platform.settings, approval_wait_s=30.0)
    later(0.5, lambda: edit_first_pending(platform))
    async with connect(slow, era) as client:
        with anyio.fail_after(25):
            result = await client.call_tool("run_tool_confirmed", SEND)
        answer = body(result)
        assert result.is_error is False
        check_edited_outcome(platform, answer)
        # job_status on the job the agent asked for answers the same.
        again = body(await client.call_tool("job_status", {"job": answer["edited_from"]}))
    assert again["job"] == answer["job"] and again["args"] == {**EDITED, "delay-s": 0}


async def test_a_client_that_opened_the_job_page_gets_the_edited_outcome(
    platform: Platform, worker: Worker, era: str
) -> None:
    del worker
    urls: list[str] = []

    async def open_page(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        del context
        urls.append(getattr(params, "url", ""))
        return ElicitResult(action="accept")

    slow = platform_with(platform.settings, approval_wait_s=30.0)
    later_when(lambda: urls, lambda: edit_first_pending(platform))
    async with connect(slow, era, elicitation_callback=open_page) as client:
        with anyio.fail_after(25):
            result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    check_edited_outcome(platform, answer)
    assert urls and urls[0].endswith(f"/jobs/{answer['edited_from']}")
