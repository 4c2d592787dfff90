"""An MCP call waiting for its job wakes when the job moves in this process (the embedded
worker finishing it, a decision), not at its next poll of the database."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from webplatform.jobs.answers import Status, answered
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.withdrawal import withdraw
from webplatform.mcp import waiting
from webplatform.platform import Actor, Platform
from webplatform.store.models import Surface

AGENT = Actor(surface=Surface.mcp_stdio, client="test-agent")
MESSAGE = {"to": "ops@example.org", "subject": "s", "body": "b"}


async def _no_progress(_elapsed: float, _total: float | None, _message: str) -> None:
    return None


def test_a_waiter_wakes_on_the_move_itself(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With a poll this slow, only the wake-up on the move can end the wait in time.
    monkeypatch.setattr(waiting, "POLL_S", 60.0)
    queued = answered(
        request_run,
        platform=platform,
        call=RunCall(kind="tool", name="outbox", action="send-message", args=MESSAGE),
        actor=AGENT,
        consent=Consent.QUEUE,
    )
    assert queued.status is Status.pending_approval and queued.job is not None
    job = queued.job

    def decide_soon() -> None:
        time.sleep(0.3)  # the waiter is asleep by then
        withdraw(platform=platform, job_id=job, actor=AGENT)

    async def wait() -> float:
        start = time.monotonic()
        answer = await waiting.wait_for_job(
            platform=platform, job_id=job, timeout_s=120.0, progress=_no_progress
        )
        assert answer.status is Status.denied, answer
        return time.monotonic() - start

    deciding = threading.Thread(target=decide_soon)
    deciding.start()
    try:
        waited = anyio.run(wait)
    finally:
        deciding.join()
    assert waited < 20.0
