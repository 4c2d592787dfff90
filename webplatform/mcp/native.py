"""Native waiting: asking a client that declared URL elicitation to open the job page.

On top of the ordinary wait (progress, then `pending_approval`), which every other client
gets unchanged:

- 2025-11-25: `elicitation/create` (mode `url`) while the call waits, and the completion
  notice once an operator decided. Progress keeps flowing meanwhile.
- 2026-07-28: the first round answers `input_required` with that URL elicitation and the job
  id as (SDK-sealed) request state; the retried call waits like a normal call.

A client that declines, cancels or answers the elicitation with an error gets the ordinary
`pending_approval` answer; the job stays queued.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from contextlib import suppress

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestURLParams, ElicitResult, InputRequiredResult
from mcp_types.version import is_version_at_least

from webplatform.answers import Answer, Status
from webplatform.platform import Platform
from webplatform.tracking import job_answer

from . import waiting

logger = logging.getLogger(__name__)

MODERN = "2026-07-28"
# The key of the one input request of the `input_required` round.
APPROVAL_INPUT = "approval"


def url_elicitation_declared(ctx: Context) -> bool:
    """True when the client declared URL-mode elicitation (either era)."""
    caps = ctx.client_capabilities
    return bool(caps and caps.elicitation and caps.elicitation.url is not None)


def is_modern(ctx: Context) -> bool:
    """True on the 2026-07-28 era (sessionless; `input_required` instead of requests)."""
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, MODERN)


def can_elicit_now(ctx: Context) -> bool:
    """True on a 2025-11-25 call whose channel can carry a server request to the client."""
    return not is_modern(ctx) and url_elicitation_declared(ctx) and ctx.session.can_send_request


def message_for(answer: Answer) -> str:
    """What the client shows the user next to the job page's link."""
    what = f"{answer.tool} {answer.action}" if answer.action else str(answer.tool)
    return (
        f"aat: an operator must approve {what} (job {answer.job}) before it runs. "
        "Open the job page to follow it; this call waits for the decision."
    )


async def wait_with_elicitation(
    *,
    ctx: Context,
    platform: Platform,
    pending: Answer,
    timeout_s: float,
    progress: waiting.Progress,
) -> Answer:
    """Wait for a queued job as usual while asking the client to open its job page.

    A decline, cancel or error from the client ends the wait with the `pending_approval`
    answer; the decision, once made, is announced with the elicitation's completion notice.
    """
    assert pending.job is not None and pending.approval_url is not None
    job_id = pending.job
    elicitation_id = f"aat-job-{job_id}-{uuid.uuid4().hex[:12]}"
    start = time.monotonic()
    outcome: list[Answer] = []
    decided = anyio.Event()

    async def ask(cancel: anyio.CancelScope) -> None:
        try:
            result = await ctx.elicit_url(
                message_for(pending), pending.approval_url or "", elicitation_id
            )
            accepted = result.action == "accept"
        except MCPError as exc:  # the client answered with an error: as a decline
            logger.info("URL elicitation for job %s answered with an error: %s", job_id, exc)
            accepted = False
        except Exception:  # could not ask at all: the ordinary answer, never a failed call
            logger.warning("URL elicitation for job %s could not be sent", job_id, exc_info=True)
            accepted = False
        if not accepted and not decided.is_set():
            cancel.cancel()

    async def wait(cancel: anyio.CancelScope) -> None:
        answer = await waiting.wait_for_job(
            platform=platform,
            job_id=job_id,
            timeout_s=timeout_s,
            progress=progress,
            until_change=True,
        )
        if answer.status is not Status.pending_approval:
            decided.set()
            with suppress(Exception):  # a gone client must not lose the outcome
                await ctx.session.send_elicit_complete(
                    elicitation_id, related_request_id=ctx.request_id
                )
            left = max(0.0, timeout_s - (time.monotonic() - start))
            answer = await waiting.wait_for_job(
                platform=platform, job_id=job_id, timeout_s=left, progress=progress
            )
        outcome.append(answer)
        cancel.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, tg.cancel_scope)
        tg.start_soon(wait, tg.cancel_scope)
    if outcome:
        return outcome[0]
    return await anyio.to_thread.run_sync(lambda: job_answer(platform=platform, job_id=job_id))


def input_required(pending: Answer) -> InputRequiredResult:
    """The 2026-07-28 first round: open the job page, then retry this call to wait for it."""
    assert pending.job is not None and pending.approval_url is not None
    return InputRequiredResult(
        input_requests={
            APPROVAL_INPUT: ElicitRequest(
                params=ElicitRequestURLParams(
                    message=message_for(pending), url=pending.approval_url
                )
            )
        },
        request_state=json.dumps({"job": pending.job}),
    )


def resumed(ctx: Context) -> tuple[int, bool] | None:
    """On a retried 2026-07-28 call: the job it queued and whether the client accepted the
    elicitation; None on a first round (or state this bridge did not write)."""
    state = ctx.request_state
    if not state:
        return None
    try:
        job = json.loads(state)["job"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(job, int) or isinstance(job, bool):
        return None
    response = (ctx.input_responses or {}).get(APPROVAL_INPUT)
    accepted = isinstance(response, ElicitResult) and response.action == "accept"
    return job, accepted
