"""Native waiting: clients that declared URL elicitation are asked to open the job page.

2025-11-25: `elicitation/create` (mode `url`) while the call waits, then the completion notice.
2026-07-28: an `input_required` round carrying that elicitation; the retried call waits.
What the client's answer means (webplatform.mcp.native.Reply): accept waits; an answer faster
than a person reads (Codex declines in milliseconds) waits as for a client without
elicitation; a person's decline withdraws the request; a person's cancel (or an error) answers
`pending_approval` at once and the job stays queued.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_helpers import approve, body, connect, later_when
from mcp_types import (
    ElicitCompleteNotification,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
    ServerNotification,
)
from platforms import platform_with
from sqlmodel import select

from webplatform.jobs import withdrawal
from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.tracking import job_state, pending_for
from webplatform.mcp import native
from webplatform.platform import Platform
from webplatform.store.engine import session_scope
from webplatform.store.models import Job
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio

SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "native", "body": "hi"},
}


# A person reads the dialog for longer than the bridge's threshold for an automatic answer.
PERSON_S = native.AUTOMATIC_ANSWER_S + 0.3


class Elicitations:
    """An elicitation callback that records each URL request and answers with `action`
    after `after_s` (0: as a client that answers without showing anything)."""

    def __init__(self, action: str = "accept", *, error: bool = False, after_s: float = 0) -> None:
        self.action = action
        self.error = error
        self.after_s = after_s
        self.asked: list[ElicitRequestURLParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        del context
        assert isinstance(params, ElicitRequestURLParams), params
        self.asked.append(params)
        await anyio.sleep(self.after_s)
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

    progress: list[str | None] = []
    # Decided once the dialog was asked for and, on the legacy era, progress flows.
    later_when(
        lambda: asked.asked and (progress or era != "legacy"),
        lambda: approve_first_pending(platform),
    )

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        del value, total
        progress.append(message)

    # A generous wait: the approval lands once the dialog was asked for, the worker runs it.
    slow = platform_with(platform.settings, approval_wait_s=30.0)
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
    assert "approval" in asked.asked[0].message and "outbox" in asked.asked[0].message
    if era == "legacy":
        assert progress, "progress keeps flowing while the elicitation waits"
        assert asked.asked[0].elicitation_id is not None
        assert notices == [asked.asked[0].elicitation_id], "completion notice once decided"


# An erring callback only on the legacy era: the SDK client never retries a modern call whose
# callback erred (test_modern_client_answering_with_an_error_leaves_the_job_queued).
ANSWERS_BY_ERA = [
    ("legacy", "decline"),
    ("legacy", "cancel"),
    ("legacy", "error"),
    ("2026-07-28", "decline"),
    ("2026-07-28", "cancel"),
]


@pytest.mark.parametrize(("era", "answer"), ANSWERS_BY_ERA)
async def test_a_client_that_answers_at_once_waits_as_one_without_elicitation(
    platform: Platform, worker: Worker, era: str, answer: str
) -> None:
    # Codex (and Claude Code's -p) decline every elicitation within milliseconds, shown to
    # nobody: the call is held like any client's, and the approval reaches the agent.
    del worker
    slow = platform_with(platform.settings, approval_wait_s=30.0)
    asked = Elicitations(answer, error=answer == "error")
    later_when(lambda: asked.asked, lambda: approve_first_pending(platform))
    async with connect(slow, era, elicitation_callback=asked) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("run_tool_confirmed", SEND)
    assert body(result)["status"] == "succeeded", body(result)
    assert len(asked.asked) == 1
    assert len(all_jobs(platform)) == 1


async def test_a_person_who_declines_withdraws_the_request(
    platform: Platform, worker: Worker, era: str
) -> None:
    # Declining the dialog to stop a send must never be followed by the send.
    del worker
    slow = platform_with(platform.settings, approval_wait_s=30.0)
    asked = Elicitations("decline", after_s=PERSON_S)
    started = time.monotonic()
    async with connect(slow, era, elicitation_callback=asked) as client:
        with anyio.fail_after(15):
            result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    assert answer["status"] == "denied", answer
    assert answer["reason"] == withdrawal.DECLINED_IN_CLIENT
    assert result.is_error is True
    assert time.monotonic() - started < 10, "a decline answers at once, not after the wait"
    assert pending_for(platform=platform) == [], "the card left the queue"
    assert job_state(platform=platform, job_id=answer["job"]).value == "denied"  # type: ignore[union-attr]


@pytest.mark.parametrize(("era", "answer"), [(e, a) for e, a in ANSWERS_BY_ERA if a != "decline"])
async def test_a_person_who_closes_the_dialog_leaves_the_job_queued(
    platform: Platform, era: str, answer: str
) -> None:
    slow = platform_with(platform.settings, approval_wait_s=30.0)
    asked = Elicitations(answer, error=answer == "error", after_s=PERSON_S)
    started = time.monotonic()
    async with connect(slow, era, elicitation_callback=asked) as client:
        with anyio.fail_after(15):
            result = await client.call_tool("run_tool_confirmed", SEND)
    body_ = body(result)
    assert body_["status"] == "pending_approval", body_
    assert body_["approval_url"] == job_page(platform, body_["job"])
    assert time.monotonic() - started < 10, "closing the dialog answers at once"
    assert [j.id for j in all_jobs(platform)] == [body_["job"]]
    assert job_state(platform=platform, job_id=body_["job"]).value == "pending_approval"  # type: ignore[union-attr]


def test_the_dialog_says_how_long_the_call_waits_and_what_each_choice_does() -> None:
    pending = Answer(
        Status.pending_approval, job=7, tool="outbox", action="send-message", approval_url="u"
    )
    text = native.message_for(pending, wait_s=50)
    assert text.startswith("outbox send-message (job 7) needs an operator's approval.")
    assert "50 s" in text
    assert "Decline withdraws it" in text[:100], "clients cut the line at the terminal's width"
    assert "leaves it queued" in text
    assert not text.startswith("aat:"), "the client already names the server"


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
