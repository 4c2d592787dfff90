"""The approval path: queue, wait with progress, distinct outcomes, job_status, the resource."""

from __future__ import annotations

import json
import time
import warnings
from typing import Any

import anyio
import pytest
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_helpers import approve, body, connect, deny, later, later_when
from mcp_types import ServerNotification
from platforms import platform_with

from webplatform.config import Settings
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import pending_for
from webplatform.mcp import approvals
from webplatform.mcp.approvals import pending_body
from webplatform.mcp.naming import PENDING_APPROVALS_URI
from webplatform.platform import Actor, Platform
from webplatform.store.models import Surface
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio

SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "please send", "body": "hi"},
}


def patient(platform: Platform) -> None:
    """Waits long enough for a decision made in a thread to land on a loaded machine; a call
    returns as soon as its job is decided or done, so this costs nothing when all is quick."""
    platform.settings = platform.settings.model_copy(update={"approval_wait_s": 10.0})


def outbox_files(platform: Platform) -> list[str]:
    folder = platform.settings.home / "outbox"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


async def test_approved_call_runs_once_and_returns_the_result(
    platform: Platform, worker: Worker, era: str
) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    def approve_first_pending() -> None:
        # On a loaded machine the call may not have queued its job yet: look until it has.
        deadline = time.monotonic() + 10
        while not (waiting := pending_for(platform=platform)) and time.monotonic() < deadline:
            time.sleep(0.05)
        approve(platform, int(waiting[0]["job"]))

    patient(platform)
    later_when(lambda: progress, approve_first_pending)
    async with connect(platform, era) as client:
        result = await client.call_tool("run_tool_confirmed", SEND, progress_callback=on_progress)
    answer = body(result)
    assert result.is_error is False, answer
    assert answer["status"] == "succeeded"
    assert len(outbox_files(platform)) == 1
    assert progress, "progress notifications while waiting"


async def test_denied_call_carries_reason_and_decider(platform: Platform, era: str) -> None:
    patient(platform)

    def deny_first_pending() -> None:
        deadline = time.monotonic() + 10
        while not (waiting := pending_for(platform=platform)) and time.monotonic() < deadline:
            time.sleep(0.05)
        deny(platform, int(waiting[0]["job"]), "not today")

    later(0.5, deny_first_pending)
    async with connect(platform, era) as client:
        result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    assert result.is_error is True
    assert answer["status"] == "denied"
    assert answer["reason"] == "not today" and answer["decided_by"] == "olga"
    assert outbox_files(platform) == []


async def test_nobody_decides_pending_then_job_status_picks_it_up(
    platform: Platform, worker: Worker, era: str
) -> None:
    async with connect(platform, era) as client:
        with anyio.fail_after(10):
            first = await client.call_tool("run_tool_confirmed", SEND)
        pending = body(first)
        assert first.is_error is False
        assert pending["status"] == "pending_approval"
        assert pending["approval_url"].endswith(f"/jobs/{pending['job']}")
        assert "job_status" in pending["next"]
        quick = body(await client.call_tool("job_status", {"job": pending["job"]}))
        assert quick["status"] == "pending_approval"
        patient(platform)
        later(0.5, lambda: approve(platform, pending["job"]))
        done = body(await client.call_tool("job_status", {"job": pending["job"], "wait_s": 30}))
        while done["status"] in ("approved", "running"):
            done = body(await client.call_tool("job_status", {"job": pending["job"], "wait_s": 5}))
    assert done["status"] == "succeeded"
    assert len(outbox_files(platform)) == 1


async def test_job_status_refuses_another_requesters_job_without_waiting(
    platform: Platform, era: str
) -> None:
    # A wait on another requester's job would tell that the job exists (and when it moves)
    # by how long the refusal takes: the bridge refuses before it waits. The wait asked for
    # is 600 s and nothing moves the job, so a bridge that waited would answer only after
    # 600 s; the refusal must come within 20 s and leave the job where it was.
    theirs = request_run(
        platform=platform,
        call=RunCall(kind="tool", name="outbox", action="send-message", args=SEND["args"]),
        actor=Actor(surface=Surface.mcp_stdio, client="someone-else"),
        consent=Consent.QUEUE,
    ).job
    assert theirs is not None
    platform.settings = platform.settings.model_copy(update={"approval_wait_s": 600.0})
    async with connect(platform, era) as client:
        with anyio.fail_after(20):
            foreign = await client.call_tool("job_status", {"job": theirs, "wait_s": 600})
            missing = await client.call_tool("job_status", {"job": theirs + 1000, "wait_s": 600})
    assert foreign.is_error is True and body(foreign)["status"] == "invalid"
    assert body(foreign)["error"] == f"no job {theirs}; job ids come from run results"
    assert body(missing)["error"] == f"no job {theirs + 1000}; job ids come from run results"
    assert [j["job"] for j in pending_for(platform=platform)] == [theirs], "nothing moved it"


async def test_pending_answer_warns_when_no_dashboard_is_running(
    platform: Platform, era: str
) -> None:
    async with connect(platform, era) as client:
        answer = body(await client.call_tool("run_tool_confirmed", SEND))
    assert answer["status"] == "pending_approval"
    assert "aat serve" in answer["warning"]


async def test_deny_irreversible_refuses_without_queuing(mcp_settings: Settings, era: str) -> None:
    strict = platform_with(mcp_settings, mcp_deny_irreversible=True)
    async with connect(strict, era) as client:
        result = await client.call_tool("run_tool_confirmed", SEND)
        reversible = await client.call_tool(
            "run_tool_confirmed", {"tool": "hello-world", "args": {"name": "x"}}
        )
    assert result.is_error is True and body(result)["status"] == "refused"
    assert pending_for(platform=strict) == []
    assert body(reversible)["status"] == "succeeded"


async def test_client_gone_mid_wait_job_survives(
    platform: Platform, worker: Worker, era: str
) -> None:
    patient(platform)  # the client leaves while its call still waits
    async with connect(platform, era) as client:
        with anyio.move_on_after(0.5):
            await client.call_tool("run_tool_confirmed", SEND)
    waiting = pending_for(platform=platform)
    assert len(waiting) == 1
    approve(platform, int(waiting[0]["job"]))
    async with connect(platform, era) as client:
        answer = body(
            await client.call_tool("job_status", {"job": waiting[0]["job"], "wait_s": 10})
        )
        while answer["status"] in ("approved", "running"):
            answer = body(await client.call_tool("job_status", {"job": answer["job"], "wait_s": 5}))
    assert answer["status"] == "succeeded"
    assert len(outbox_files(platform)) == 1


async def read_pending(client: Any) -> dict[str, Any]:
    result = await client.read_resource(PENDING_APPROVALS_URI)
    return json.loads(result.contents[0].text)  # type: ignore[no-any-return]


async def test_resource_lists_this_clients_waiting_jobs(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        listed = [r.uri for r in (await client.list_resources()).resources]
        assert PENDING_APPROVALS_URI in listed
        assert (await read_pending(client))["count"] == 0
        job = body(await client.call_tool("run_tool_confirmed", SEND))["job"]
        first, second = await read_pending(client), await read_pending(client)
        assert first == second  # level-triggered: reading changes nothing
        assert [j["job"] for j in first["jobs"]] == [job]
        assert first["jobs"][0]["args"]["subject"] == "please send"
        deny(platform, job, "no")
        assert (await read_pending(client))["count"] == 0


async def test_resource_never_shows_another_clients_jobs(platform: Platform, era: str) -> None:
    # Another client; a nameless one; an agent token's call from a client named like ours.
    for client, agent in (("someone-else", None), (None, None), ("mcp", "ci-bot")):
        request_run(
            platform=platform,
            call=RunCall(
                kind="tool",
                name="outbox",
                action="send-message",
                args={**SEND["args"], "subject": f"private to {agent or client}"},
            ),
            actor=Actor(surface=Surface.mcp_stdio, client=client, agent=agent),
            consent=Consent.QUEUE,
        )
    async with connect(platform, era) as client:
        job = body(await client.call_tool("run_tool_confirmed", SEND))["job"]
        pending = await read_pending(client)
    assert [j["job"] for j in pending["jobs"]] == [job]
    assert "private to" not in json.dumps(pending)
    # A client that gave no name sees only the nameless client's jobs, not everyone's.
    nameless = json.loads(pending_body(platform=platform, surface=Surface.mcp_stdio, client=None))
    assert [j["args"]["subject"] for j in nameless["jobs"]] == ["private to None"]
    # With a token, the agent sees its own calls, whatever its client is called.
    agent = json.loads(
        pending_body(platform=platform, surface=Surface.mcp_stdio, client="x", agent="ci-bot")
    )
    assert [j["args"]["subject"] for j in agent["jobs"]] == ["private to ci-bot"]


async def test_legacy_subscriber_is_told_when_a_job_is_decided(platform: Platform) -> None:
    updates: list[str] = []

    async def on_message(message: object) -> None:
        if isinstance(message, ServerNotification) and message.method == (
            "notifications/resources/updated"
        ):
            updates.append(str(message.params.uri))  # type: ignore[union-attr]

    async with connect(platform, "legacy", message_handler=on_message) as client:
        job = body(await client.call_tool("run_tool_confirmed", SEND))["job"]
        with warnings.catch_warnings():  # deprecated at 2026-07-28, the legacy era's way
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.session.subscribe_resource(PENDING_APPROVALS_URI)
        with anyio.fail_after(10):  # the watcher's first read for a new subscriber
            while not updates:
                await anyio.sleep(0.1)
        updates.clear()
        deny(platform, job, "no")
        with anyio.fail_after(10):
            while not updates:
                await anyio.sleep(0.1)
    assert updates[0] == PENDING_APPROVALS_URI


async def test_modern_listener_is_told_when_a_job_is_decided(platform: Platform) -> None:
    async with connect(platform, "2026-07-28") as client:
        job = body(await client.call_tool("run_tool_confirmed", SEND))["job"]
        async with client.listen(resource_subscriptions=[PENDING_APPROVALS_URI]) as sub:
            with anyio.fail_after(10):  # the watcher's first read for a new listener
                first = await sub.__anext__()
            deny(platform, job, "no")
            with anyio.fail_after(10):
                event = await sub.__anext__()
    assert isinstance(first, ResourceUpdated)
    assert isinstance(event, ResourceUpdated) and event.uri == PENDING_APPROVALS_URI


async def test_a_new_listener_wakes_the_sleeping_watcher_at_once(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nobody subscribed the watcher sleeps on no timer: the subscription itself wakes
    it (a minute between looks here, so no look of its own can answer in time)."""
    monkeypatch.setattr(approvals, "WATCH_EVERY_S", 60.0)
    async with connect(platform, "2026-07-28") as client:
        await anyio.sleep(0.2)  # the watcher is asleep
        async with client.listen(resource_subscriptions=[PENDING_APPROVALS_URI]) as sub:
            with anyio.fail_after(5):
                first = await sub.__anext__()
    assert isinstance(first, ResourceUpdated)


async def test_nobody_listening_leaves_the_queue_unread(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[Surface] = []

    def counted(**kw: Any) -> list[dict[str, Any]]:
        reads.append(kw["surface"])
        return pending_for(**kw)

    monkeypatch.setattr(approvals, "pending_for", counted)
    async with connect(platform, "2026-07-28") as client:
        await anyio.sleep(2.5 * approvals.WATCH_EVERY_S)  # the watcher's period, 2.5 times
        assert reads == [], "the queue was read with nobody subscribed"
        async with client.listen(resource_subscriptions=[PENDING_APPROVALS_URI]) as sub:
            with anyio.fail_after(10):
                await sub.__anext__()
        assert reads, "a listener gets the queue watched"
