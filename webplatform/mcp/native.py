"""Native waiting: asking a client that declared URL elicitation to open the job page.

On top of the ordinary wait (progress, then `pending_approval`), which every other client
gets unchanged:

- 2025-11-25: `elicitation/create` (mode `url`) while the call waits, and the completion
  notice once an operator decided. Progress keeps flowing meanwhile.
- 2026-07-28: the first round answers `input_required` with that URL elicitation and the job
  id (and when it was asked) as (SDK-sealed) request state; the retried call waits like a
  normal call.

What the client's answer means (`Reply`), as the dialog's text tells the person:

- accept ("open", "continue"): the call keeps waiting for the decision;
- an answer sooner than a person could read the dialog (`AUTOMATIC_ANSWER_S`), whatever it
  says: the client did not show it (Codex declines every elicitation within milliseconds,
  Claude Code's `-p` too), so the call waits exactly as for a client without elicitation;
- decline, by a person: the request is withdrawn (denied `declined in the agent's client`),
  so declining to stop a send is never followed by the send;
- cancel (the dialog closed, Esc) or an error, by a person: the call answers
  `pending_approval` at once and the job stays queued for the operator.
"""

from __future__ import annotations

import enum
import json
import logging
import time
import uuid
from contextlib import suppress
from typing import Final

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestURLParams, ElicitResult, InputRequiredResult
from mcp_types.version import is_version_at_least

from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.tracking import job_answer
from webplatform.jobs.withdrawal import DECLINED_IN_CLIENT, withdraw
from webplatform.mcp import waiting
from webplatform.platform import Actor, Platform

logger = logging.getLogger(__name__)

MODERN = "2026-07-28"
# The key of the one input request of the `input_required` round.
APPROVAL_INPUT = "approval"
# Nobody reads a dialog and chooses in less: an answer this fast came from the client itself.
AUTOMATIC_ANSWER_S: Final = 1.0


class Reply(enum.Enum):
    """What a client's answer to the job page's elicitation means for the waiting call."""

    # Opened the page or chose to continue: wait for the decision.
    accepted = "accepted"
    # Answered before anyone could have read it: wait as for a client without elicitation.
    automatic = "automatic"
    # A person declined: withdraw the request.
    declined = "declined"
    # A person closed the dialog (or the client erred): answer now, the job stays queued.
    dismissed = "dismissed"


def reply_for(action: str | None, answered_in_s: float) -> Reply:
    """The meaning of the client's `action` (None for an error), answered after `answered_in_s`."""
    if action == "accept":
        return Reply.accepted
    if answered_in_s < AUTOMATIC_ANSWER_S:
        return Reply.automatic
    return Reply.declined if action == "decline" else Reply.dismissed


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


def message_for(answer: Answer, *, wait_s: float) -> str:
    """What the client shows the user next to the job page's link: what waits, what Decline
    does, how long the call waits once they continue, what closing the dialog does. Most
    important first: clients show it on one line cut to the terminal's width."""
    what = f"{answer.tool} {answer.action}" if answer.action else str(answer.tool)
    return (
        f"{what} (job {answer.job}) needs an operator's approval. Decline withdraws it. "
        f"Continue waits up to {wait_s:.0f} s; closing this leaves it queued."
    )


async def withdraw_declined(platform: Platform, job_id: int, actor: Actor) -> None:
    """The user declined the job page in their client: `actor`'s job is withdrawn."""
    await anyio.to_thread.run_sync(
        lambda: withdraw(platform=platform, job_id=job_id, actor=actor, reason=DECLINED_IN_CLIENT)
    )


async def wait_with_elicitation(
    ctx: Context,
    pending: Answer,
    *,
    platform: Platform,
    actor: Actor,
    progress: waiting.Progress,
) -> Answer:
    """Wait for a queued job as usual (up to `AAT_APPROVAL_WAIT_S`) while asking the client
    to open its job page.

    The client's answer acts as `Reply` says; the decision, once made, is announced with the
    elicitation's completion notice.
    """
    assert pending.job is not None and pending.approval_url is not None
    job_id, timeout_s = pending.job, platform.settings.approval_wait_s
    elicitation_id = f"aat-job-{job_id}-{uuid.uuid4().hex[:12]}"
    start = time.monotonic()
    outcome: list[Answer] = []
    decided = anyio.Event()

    async def ask(cancel: anyio.CancelScope) -> None:
        reply = await _ask(ctx, pending, elicitation_id, wait_s=timeout_s)
        if decided.is_set() or reply in (Reply.accepted, Reply.automatic):
            return
        if reply is Reply.declined:
            await withdraw_declined(platform, job_id, actor)
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


async def _ask(ctx: Context, pending: Answer, elicitation_id: str, *, wait_s: float) -> Reply:
    """Ask the client to open the job page; what its answer means."""
    asked = time.monotonic()
    action: str | None = None
    try:
        result = await ctx.elicit_url(
            message_for(pending, wait_s=wait_s), pending.approval_url or "", elicitation_id
        )
        action = result.action
    except MCPError as exc:  # the client answered with an error
        logger.info("URL elicitation for job %s answered with an error: %s", pending.job, exc)
    except Exception:  # could not ask at all: as a client that cannot show it
        logger.warning("URL elicitation for job %s could not be sent", pending.job, exc_info=True)
        return Reply.automatic
    reply = reply_for(action, time.monotonic() - asked)
    if reply is Reply.automatic:
        logger.info(
            "the client answered the job page's elicitation (%s) in %.0f ms, before anyone "
            "could read it: job %s waits as for a client without elicitation",
            action or "error",
            (time.monotonic() - asked) * 1000,
            pending.job,
        )
    return reply


def input_required(pending: Answer, *, wait_s: float) -> InputRequiredResult:
    """The 2026-07-28 first round: open the job page, then retry this call to wait for it."""
    assert pending.job is not None and pending.approval_url is not None
    return InputRequiredResult(
        input_requests={
            APPROVAL_INPUT: ElicitRequest(
                params=ElicitRequestURLParams(
                    message=message_for(pending, wait_s=wait_s), url=pending.approval_url
                )
            )
        },
        request_state=json.dumps({"job": pending.job, "asked": time.time()}),
    )


def resumed(ctx: Context) -> tuple[int, Reply] | None:
    """On a retried 2026-07-28 call: the job it queued and what the client's answer means;
    None on a first round (or state this bridge did not write)."""
    state = ctx.request_state
    if not state:
        return None
    try:
        claims = json.loads(state)
        job, asked = claims["job"], float(claims["asked"])
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(job, int) or isinstance(job, bool):
        return None
    response = (ctx.input_responses or {}).get(APPROVAL_INPUT)
    action = response.action if isinstance(response, ElicitResult) else None
    return job, reply_for(action, time.time() - asked)
