"""Native waiting: clients that declared URL elicitation are asked to open the job page.

2025-11-25: `elicitation/create` (mode `url`) while the call waits, then the completion notice.
2026-07-28: an `input_required` round carrying that elicitation; the retried call waits.
A client that declines, cancels or errors gets `pending_approval`; the job stays queued.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_helpers import approve, body, connect, later, make_platform
from mcp_types import (
    ElicitCompleteNotification,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
    ServerNotification,
)
from sqlmodel import select

from webplatform.platform import Platform
from webplatform.store.engine import session_scope
from webplatform.store.models import Job
from webplatform.tracking import job_state, pending_for
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio

SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "native", "body": "hi"},
}


class Elicitations:
    """An elicitation callback that records each URL request and answers with `action`."""

    def __init__(self, action: str = "accept", *, error: bool = False) -> None:
        self.action = action
        self.error = error
        self.asked: list[ElicitRequestURLParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        del context
        assert isinstance(params, ElicitRequestURLParams), params
        self.asked.append(params)
        if self.error:
            return ErrorData(code=-32603, message="this client cannot open links")
        return ElicitResult(action=self.action)  # type: ignore[arg-type]


def all_jobs(platform: Platform) -> list[Job]:
    with session_scope(platform.engine) as session:
        return list(session.exec(select(Job)).all())


def approve_first_pending(platform: Platform) -> None:
    """Approve the first job waiting, as soon as there is one (a bridge process starts slowly)."""
    deadline = time.monotonic() + 30
    while not (waiting := pending_for(platform=platform)) and time.monotonic() < deadline:
        time.sleep(0.1)
    approve(platform, int(waiting[0]["job"]))


def job_page(platform: Platform, job_id: int) -> str:
    return f"{platform.settings.dashboard_url.rstrip('/')}/jobs/{job_id}"


async def test_client_opens_the_job_page_and_the_same_call_gets_the_outcome(
    platform: Platform, worker: Worker, era: str
) -> None:
    del worker
    asked = Elicitations("accept")
    notices: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ServerNotification) and isinstance(
            message, ElicitCompleteNotification
        ):
            notices.append(message.params.elicitation_id)

    later(1.0, lambda: approve_first_pending(platform))
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        del value, total
        progress.append(message)

    # A generous wait: the approval lands after 1 s, the worker then runs it.
    slow = make_platform(platform.settings, approval_wait_s=30.0)
    async with connect(slow, era, elicitation_callback=asked, message_handler=on_message) as client:
        with anyio.fail_after(15):
            result = await client.call_tool(
                "run_tool_confirmed", SEND, progress_callback=on_progress
            )
    answer = body(result)
    assert answer["status"] == "succeeded", answer
    assert result.is_error is False
    jobs = all_jobs(platform)
    assert len(jobs) == 1, "the retried call must not queue a second job"
    assert [p.url for p in asked.asked] == [job_page(platform, answer["job"])]
    assert "approve" in asked.asked[0].message and "outbox" in asked.asked[0].message
    if era == "legacy":
        assert progress, "progress keeps flowing while the elicitation waits"
        assert asked.asked[0].elicitation_id is not None
        assert notices == [asked.asked[0].elicitation_id], "completion notice once decided"


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_declining_client_gets_pending_approval_and_the_job_stays_queued(
    platform: Platform, era: str, action: str
) -> None:
    slow = make_platform(platform.settings, approval_wait_s=30.0)
    asked = Elicitations(action)
    started = time.monotonic()
    async with connect(slow, era, elicitation_callback=asked) as client:
        with anyio.fail_after(15):
            result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    assert answer["status"] == "pending_approval", answer
    assert answer["approval_url"] == job_page(platform, answer["job"])
    assert time.monotonic() - started < 10, "a decline answers at once, not after the wait"
    assert len(asked.asked) == 1
    assert [j.id for j in all_jobs(platform)] == [answer["job"]]
    assert job_state(platform=platform, job_id=answer["job"]).value == "pending_approval"  # type: ignore[union-attr]


async def test_legacy_client_answering_with_an_error_gets_pending_approval(
    platform: Platform,
) -> None:
    slow = make_platform(platform.settings, approval_wait_s=30.0)
    asked = Elicitations(error=True)
    async with connect(slow, "legacy", elicitation_callback=asked) as client:
        with anyio.fail_after(15):
            result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    assert answer["status"] == "pending_approval", answer
    assert len(asked.asked) == 1
    assert job_state(platform=platform, job_id=answer["job"]).value == "pending_approval"  # type: ignore[union-attr]


async def test_modern_client_answering_with_an_error_leaves_the_job_queued(
    platform: Platform, worker: Worker
) -> None:
    # The SDK client gives up on its own when its callback errs (it never retries), so the
    # agent learns of the job through the approvals resource or job_status.
    del worker
    asked = Elicitations(error=True)
    async with connect(platform, "2026-07-28", elicitation_callback=asked) as client:
        with pytest.raises(MCPError, match="cannot open links"):
            await client.call_tool("run_tool_confirmed", SEND)
        [queued] = pending_for(platform=platform)
        approve(platform, int(queued["job"]))
        with anyio.fail_after(15):
            status = body(
                await client.call_tool("job_status", {"job": queued["job"], "wait_s": 10})
            )
            while status["status"] != "succeeded":
                status = body(
                    await client.call_tool("job_status", {"job": queued["job"], "wait_s": 10})
                )
    assert asked.asked[0].url == job_page(platform, int(queued["job"]))
    assert len(all_jobs(platform)) == 1


async def test_nobody_decides_the_elicited_call_ends_pending_after_the_wait(
    platform: Platform, era: str
) -> None:
    asked = Elicitations("accept")
    async with connect(platform, era, elicitation_callback=asked) as client:
        with anyio.fail_after(15):
            result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    assert answer["status"] == "pending_approval"
    assert len(all_jobs(platform)) == 1


async def test_reversible_calls_never_elicit(platform: Platform, era: str) -> None:
    asked = Elicitations("accept")
    async with connect(platform, era, elicitation_callback=asked) as client:
        ran = body(
            await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "N"}})
        )
    assert ran["status"] == "succeeded"
    assert asked.asked == []
