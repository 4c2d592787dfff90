"""The Tasks extension: a confirmed call queued for approval becomes a task a client polls.

With the SDK client (in memory here; over HTTP and `aat mcp` in test_tasks_transports.py):
`working` until an operator decides, then the tool result; `tasks/cancel` withdraws the
request; another requester cannot see the task; a client that did not opt in is unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import anyio
import pytest
import tasks_client as tc
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_helpers import approve, body, connect, deny
from mcp_types import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, Implementation
from sqlmodel import select
from test_edit_waiting import edit_first_pending
from test_native_waiting import SEND, all_jobs, job_page

from webplatform.jobs import withdrawal
from webplatform.jobs.tracking import job_state, pending_for
from webplatform.mcp import build_server, tasks
from webplatform.platform import Platform
from webplatform.store.audit import audit_events
from webplatform.store.engine import session_scope
from webplatform.store.models import Job, JobState, Surface
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"


async def poll_until_done(client: Client, task_id: str) -> tc.TaskState:
    """Poll `tasks/get` as a client would, at the interval the server suggests."""
    with anyio.fail_after(30):
        while True:
            state = await tc.get(client, task_id)
            if state.status != "working":
                return state
            await anyio.sleep((state.poll_interval_ms or 1000) / 1000 / 10)


def the_job(platform: Platform, job_id: int) -> Job:
    with session_scope(platform.engine) as session:
        job = session.exec(select(Job).where(Job.id == job_id)).one()
        session.expunge(job)
        return job


async def test_task_works_until_an_operator_approves_then_carries_the_result(
    platform: Platform, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    del worker
    # A long wait, so answering at once is told apart from holding the call for the wait.
    monkeypatch.setattr(platform.settings, "approval_wait_s", 10.0)
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        started = time.monotonic()
        created = await tc.call(client, "run_tool_confirmed", SEND)
        assert isinstance(created, tc.CreatedTask), created
        assert time.monotonic() - started < platform.settings.approval_wait_s, (
            "a task answers at once instead of holding the call"
        )
        assert created.status == "working"
        [queued] = pending_for(platform=platform)
        job_id = int(queued["job"])
        assert job_page(platform, job_id) in (created.status_message or "")

        polled = await tc.get(client, created.task_id)
        assert polled.status == "working", "nobody decided yet"
        approve(platform, job_id)
        done = await poll_until_done(client, created.task_id)

    assert done.status == "completed", done
    assert done.result is not None
    result = done.result["structuredContent"]
    assert result["status"] == "succeeded", result
    assert result["job"] == job_id
    assert done.result["isError"] is False
    assert len(all_jobs(platform)) == 1


async def test_task_ids_fit_what_clients_accept(platform: Platform) -> None:
    # Claude Code refuses a task id over 128 characters ("malformed task handle") and then
    # cancels the task, which withdrew the request before any operator saw it.
    long_names = Implementation(name="c" * 200, version="1")
    async with connect(
        platform, MODERN, extensions=[tc.TasksClient()], client_info=long_names
    ) as c:
        first = await tc.call(c, "run_tool_confirmed", SEND)
        second = await tc.call(c, "run_tool_confirmed", SEND)
    assert isinstance(first, tc.CreatedTask) and isinstance(second, tc.CreatedTask)
    assert len(first.task_id) <= tasks.MAX_TASK_ID_CHARS, len(first.task_id)
    assert first.task_id != second.task_id
    assert len(pending_for(platform=platform)) == 2, "both requests still wait"


async def test_a_denied_call_completes_the_task_with_the_denial(platform: Platform) -> None:
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        created = await tc.call(client, "run_tool_confirmed", SEND)
        assert isinstance(created, tc.CreatedTask)
        [queued] = pending_for(platform=platform)
        deny(platform, int(queued["job"]), "not today")
        done = await poll_until_done(client, created.task_id)
    assert done.status == "completed"
    assert done.result is not None and done.result["isError"] is True
    assert done.result["structuredContent"]["status"] == "denied"
    assert done.result["structuredContent"]["reason"] == "not today"


async def test_cancel_withdraws_the_request_and_nothing_runs(
    platform: Platform, worker: Worker
) -> None:
    del worker
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        created = await tc.call(client, "run_tool_confirmed", SEND)
        assert isinstance(created, tc.CreatedTask)
        [queued] = pending_for(platform=platform)
        job_id = int(queued["job"])
        await tc.cancel(client, created.task_id)
        assert pending_for(platform=platform) == [], "the card leaves the approval queue"
        state = await tc.get(client, created.task_id)
        # A late Approve finds nothing to approve.
        with pytest.raises(Exception, match="denied|state"):
            approve(platform, job_id)
        # Cancelling again is acknowledged and changes nothing.
        await tc.cancel(client, created.task_id)

    assert state.status == "cancelled"
    assert "withdrawn by the agent" in (state.status_message or "")
    job = the_job(platform, job_id)
    assert job.state == JobState.denied
    assert job.reason == "withdrawn by the agent"
    assert job.decided_by and "agent" in job.decided_by
    assert job.started_at is None and job.result_json is None, "a withdrawn call never runs"
    with session_scope(platform.engine) as session:
        events = audit_events(session=session, job_id=job_id)
    assert any(e.to_state == JobState.denied.value for e in events), "the withdrawal is audited"
    assert job_state(platform=platform, job_id=job_id) is JobState.denied


async def test_another_requester_cannot_read_or_cancel_the_task(platform: Platform) -> None:
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        created = await tc.call(client, "run_tool_confirmed", SEND)
    assert isinstance(created, tc.CreatedTask)
    stranger = Implementation(name="someone-else", version="1")
    server = build_server(platform, surface=Surface.mcp_stdio)
    async with Client(
        server, mode=MODERN, extensions=[tc.TasksClient()], client_info=stranger
    ) as other:
        with pytest.raises(MCPError, match="no such task") as read:
            await tc.get(other, created.task_id)
        with pytest.raises(MCPError, match="no such task") as cancelled:
            await tc.cancel(other, created.task_id)
    assert read.value.code == cancelled.value.code == INVALID_PARAMS
    assert len(pending_for(platform=platform)) == 1, "the owner's request still waits"


# Plain encodings an unsealed task id might use: a prefix, then bytes as text.
PLAIN: dict[str, tuple[Callable[[bytes], str], Callable[[str], bytes]]] = {
    "base64url": (
        lambda b: base64.urlsafe_b64encode(b).decode().rstrip("="),
        lambda t: base64.urlsafe_b64decode(t + "=" * (-len(t) % 4)),
    ),
    "base64": (lambda b: base64.b64encode(b).decode(), base64.b64decode),
    "hex": (lambda b: b.hex(), bytes.fromhex),
}
PREFIXES = ("", "v1.")


def _forged_ids(own_id: str, own_job: int, victim_job: int) -> list[str]:
    """Task ids for `victim_job`, as an attacker makes them from what is public: the victim's
    job id (job ids count up) and the attacker's own task id. If the attacker's own id opens
    under a plain encoding into claims naming its own job, the same claims naming the
    victim's job are encoded the same way; otherwise every plain encoding is tried with claims
    built from scratch (the version, the job, a time, the attacker's own requester digest)."""
    for prefix, (encode, decode) in ((p, c) for p in PREFIXES for c in PLAIN.values()):
        try:
            claims = decode(own_id.removeprefix(prefix)) if own_id.startswith(prefix) else b""
        except ValueError:
            continue
        if len(claims) == tasks._ID_CLAIMS.size and claims[1:9] == own_job.to_bytes(8, "big"):
            return [prefix + encode(claims[:1] + victim_job.to_bytes(8, "big") + claims[9:])]
    mine = hashlib.sha256(json.dumps([None, "someone-else"], separators=(",", ":")).encode())
    now_ms = int(time.time() * 1000)
    claims = tasks._ID_CLAIMS.pack(tasks._ID_VERSION, victim_job, now_ms, mine.digest()[:16])
    return [prefix + encode(claims) for prefix in PREFIXES for encode, _ in PLAIN.values()]


async def test_a_task_id_forged_from_its_public_fields_names_no_task(platform: Platform) -> None:
    # Every field of a task id is public or guessable: the job id, its time, a digest of the
    # caller's own names. Only the seal keeps a stranger from naming another requester's job;
    # an id merely encoded would let them read its result and withdraw it.
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        victims = await tc.call(client, "run_tool_confirmed", SEND)
    assert isinstance(victims, tc.CreatedTask)
    [queued] = pending_for(platform=platform)
    victim_job = int(queued["job"])
    stranger = Implementation(name="someone-else", version="1")
    server = build_server(platform, surface=Surface.mcp_stdio)
    async with Client(
        server, mode=MODERN, extensions=[tc.TasksClient()], client_info=stranger
    ) as other:
        mine = {**SEND, "args": {**SEND["args"], "subject": "mine"}}
        own = await tc.call(other, "run_tool_confirmed", mine)
        assert isinstance(own, tc.CreatedTask), own
        own_job = max(int(p["job"]) for p in pending_for(platform=platform))
        assert (await tc.get(other, own.task_id)).status == "working", "the stranger's own"
        forged = _forged_ids(own.task_id, own_job, victim_job)
        for task_id in forged:
            with pytest.raises(MCPError, match="no such task"):
                await tc.get(other, task_id)
            with pytest.raises(MCPError, match="no such task"):
                await tc.cancel(other, task_id)
    assert job_state(platform=platform, job_id=victim_job) is JobState.pending_approval


async def test_the_same_requester_polls_the_task_from_a_new_bridge(platform: Platform) -> None:
    # A restart: a new server on the same AAT_HOME opens task ids the old one made.
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        created = await tc.call(client, "run_tool_confirmed", SEND)
    assert isinstance(created, tc.CreatedTask)
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        assert (await tc.get(client, created.task_id)).status == "working"


@pytest.mark.parametrize("task_id", ["v1.nope", "not-a-task", "v1." + "A" * 200])
async def test_an_unknown_task_id_gets_a_clear_error(platform: Platform, task_id: str) -> None:
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        with pytest.raises(MCPError) as raised:
            await tc.get(client, task_id)
        with pytest.raises(MCPError, match="Failed to cancel task"):
            await tc.cancel(client, task_id)
    assert raised.value.code == INVALID_PARAMS
    assert "Failed to retrieve task: no such task" in raised.value.message
    assert "run_tool_confirmed" in raised.value.message


async def test_a_client_that_did_not_opt_in_waits_as_before(platform: Platform, era: str) -> None:
    # The legacy era cannot carry a task, so the extension is never offered there either.
    extensions = [tc.TasksClient()] if era == "legacy" else []
    async with connect(platform, era, extensions=extensions) as client:
        result = await client.call_tool("run_tool_confirmed", SEND)
        answer = body(result)
        assert answer["status"] == "pending_approval", answer
        assert answer["approval_url"] == job_page(platform, answer["job"])
        if era == MODERN:
            with pytest.raises(MCPError) as raised:
                await tc.get(client, "v1.anything")
            assert raised.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_reversible_calls_and_other_tools_never_become_tasks(platform: Platform) -> None:
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        ran = await tc.call(
            client, "run_tool_confirmed", {"tool": "hello-world", "args": {"name": "N"}}
        )
        listed = await tc.call(client, "capabilities", {})
    assert not isinstance(ran, tc.CreatedTask) and body(ran)["status"] == "succeeded"
    assert not isinstance(listed, tc.CreatedTask)
    assert all_jobs(platform)[0].state == JobState.succeeded


async def test_a_task_follows_an_edited_job_and_cancel_withdraws_the_edited_one(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two approvals: the editor's is the first, so the edited job still waits for another.
    monkeypatch.setattr(platform.settings, "approvals_required", 2)
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        created = await tc.call(client, "run_tool_confirmed", SEND)
        assert isinstance(created, tc.CreatedTask), created
        await anyio.to_thread.run_sync(lambda: edit_first_pending(platform))
        [queued] = pending_for(platform=platform)
        edited = int(queued["job"])
        working = await tc.get(client, created.task_id)
        assert working.status == "working"
        assert f"job {edited} waits" in (working.status_message or "")

        await tc.cancel(client, created.task_id)
        assert pending_for(platform=platform) == [], "the edited card leaves the queue"
        state = await tc.get(client, created.task_id)

    assert state.status == "cancelled", state
    job = the_job(platform, edited)
    assert job.state == JobState.denied and job.reason == "withdrawn by the agent"
    # The task last changed when the edited job was withdrawn, not when the edit was made.
    withdrawn = job.updated_at.replace(microsecond=job.updated_at.microsecond // 1000 * 1000)
    assert datetime.fromisoformat(state.last_updated_at) >= withdrawn


async def test_an_edit_landing_while_a_cancel_is_under_way_is_withdrawn_too(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cancel looks the job up, then denies it: an operator's edit between the two steps
    # denies the original and makes a new pending job, which must not be left to run.
    monkeypatch.setattr(platform.settings, "approvals_required", 2)
    real_deny = withdrawal._deny
    edited_meanwhile: list[bool] = []

    def deny_after_an_edit(platform_: Platform, job_id: int, actor: Any, reason: str) -> Job:
        if not edited_meanwhile:
            edit_first_pending(platform_)
            edited_meanwhile.append(True)
        return real_deny(platform_, job_id, actor, reason)

    monkeypatch.setattr(withdrawal, "_deny", deny_after_an_edit)
    async with connect(platform, MODERN, extensions=[tc.TasksClient()]) as client:
        created = await tc.call(client, "run_tool_confirmed", SEND)
        assert isinstance(created, tc.CreatedTask), created
        await tc.cancel(client, created.task_id)
        state = await tc.get(client, created.task_id)
    assert edited_meanwhile and state.status == "cancelled", state
    assert pending_for(platform=platform) == [], "the edited job was left waiting"
    original, edited = all_jobs(platform)[-2:]
    assert original.reason is not None and original.reason.startswith("edited by")
    assert edited.edited_from == original.id
    assert edited.state == JobState.denied and edited.reason == "withdrawn by the agent"
