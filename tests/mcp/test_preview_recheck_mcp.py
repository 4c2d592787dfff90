"""An agent waiting on a call whose preview changed after it was approved (SPEC §20) keeps
waiting: the worker sends the call back to its approvers instead of running it, and the
agent's `run_tool_confirmed` answers with the outcome of the run a new approval starts."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from mcp_helpers import body, connect
from stepup_helpers import job_step_up

from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import decisions, recheck
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Status
from webplatform.jobs.decisions import Shown
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import pending_for
from webplatform.platform import Actor, Platform
from webplatform.store import previews as preview_rows
from webplatform.store.models import JobState, Surface
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parents[1]
PUBLISH = {"tool": "drafts", "action": "publish", "args": {}}


@pytest.fixture
def platform_settings(platform_settings: Settings) -> Settings:
    """The test tools (drafts) and the examples; the agent waits long enough for two
    approvals (a call returns as soon as its job is done, so this costs nothing)."""
    return platform_settings.model_copy(
        update={"registry": f"{TESTS}:{EXAMPLES_ROOT}", "approval_wait_s": 60.0}
    )


def edit(platform: Platform, text: str) -> None:
    """A reversible call rewrites the draft `publish` publishes."""
    call = RunCall(kind="tool", name="drafts", action="edit", args={"text": text})
    actor = Actor(surface=Surface.mcp_stdio, client="test-agent")
    answer = request_run(platform=platform, call=call, actor=actor, consent=Consent.NONE)
    assert answer.status is Status.succeeded, answer


def state(platform: Platform, job_id: int) -> JobState:
    job = platform.transact(lambda s: jobs.get_job(session=s, job_id=job_id), write=False)
    assert job is not None
    return JobState(job.state)


def approve_as_shown(platform: Platform, job_id: int) -> None:
    step_up = job_step_up(platform, job_id, "olga")  # once the preview has landed
    row = platform.transact(lambda s: preview_rows.preview_of(session=s, job_id=job_id))
    assert row is not None and row.digest is not None
    decisions.approve_shown(
        platform=platform,
        job_id=job_id,
        operator="olga",
        shown=Shown(step_up.digest, row.digest),
        address=None,
        step_up=step_up,
    )


def until(predicate: object, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def operator_and_agent(platform: Platform, seen: list[str]) -> None:
    """The operator approves the card, the agent rewrites the draft first, the worker sends
    the call back; the operator approves the card as it is now."""
    until(lambda: pending_for(platform=platform), "the call to be queued")
    job_id = int(pending_for(platform=platform)[0]["job"])
    worker = Worker(platform=platform, settings=platform.settings, load_registry=platform.registry)
    step_up = job_step_up(platform, job_id, "olga")  # the harmless preview has landed
    edit(platform, "the launch code is 0000")
    row = platform.transact(lambda s: preview_rows.preview_of(session=s, job_id=job_id))
    assert row is not None and row.digest is not None
    decisions.approve_shown(
        platform=platform,
        job_id=job_id,
        operator="olga",
        shown=Shown(step_up.digest, row.digest),
        address=None,
        step_up=step_up,
    )
    assert worker.run_once()
    seen.append(state(platform, job_id).value)
    approve_as_shown(platform, job_id)
    assert worker.run_once()


async def test_the_agent_keeps_waiting_while_a_changed_preview_is_approved_again(
    platform: Platform, era: str
) -> None:
    edit(platform, "Q3 numbers look fine")
    seen: list[str] = []
    operator = threading.Thread(target=operator_and_agent, args=(platform, seen), daemon=True)
    operator.start()
    async with connect(platform, era) as client:
        answer = body(await client.call_tool("run_tool_confirmed", PUBLISH))
    operator.join(timeout=30)
    assert seen == ["pending_approval"]  # sent back, not run, while the agent waited
    assert answer["status"] == "succeeded", answer
    assert answer["result"] == {"published": "the launch code is 0000"}
    published = platform.settings.home / "data" / "drafts" / "published.txt"
    assert published.read_text(encoding="utf-8") == "the launch code is 0000\n"
    events = platform.transact(
        lambda s: jobs.audit_events(session=s, job_id=answer["job"]), write=False
    )
    assert [e.event for e in events].count(recheck.PREVIEW_CHANGED) == 1
