"""The Tasks extension over the real transports: `/mcp` on uvicorn, and `aat mcp` on stdio."""

from __future__ import annotations

import anyio
import pytest
import tasks_client as tc
from mcp import Client
from mcp_helpers import aat_mcp_process, approve, serve_mcp
from stepup_helpers import preview_landed
from test_native_waiting import SEND, all_jobs
from test_tasks import MODERN, poll_until_done

from webplatform.jobs.tracking import pending_for
from webplatform.platform import Platform
from webplatform.store.models import JobState
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio


async def test_http_client_polls_a_task_to_the_result(platform: Platform, worker: Worker) -> None:
    del worker
    with serve_mcp(platform) as base:
        async with Client(f"{base}/mcp", mode=MODERN, extensions=[tc.TasksClient()]) as client:
            discovered = await client.session.send_discover(MODERN)
            extensions = discovered["capabilities"].get("extensions", {})
            assert tc.TASKS in extensions, "server/discover advertises the extension"
            with anyio.fail_after(15):
                created = await tc.call(client, "run_tool_confirmed", SEND)
            assert isinstance(created, tc.CreatedTask), created
            assert (await tc.get(client, created.task_id)).status == "working"
            [queued] = pending_for(platform=platform)
            approve(platform, int(queued["job"]))
            done = await poll_until_done(client, created.task_id)
    assert done.status == "completed"
    assert done.result is not None
    assert done.result["structuredContent"]["status"] == "succeeded"


async def test_http_cancel_withdraws_the_request(platform: Platform) -> None:
    with serve_mcp(platform) as base:
        async with Client(f"{base}/mcp", mode=MODERN, extensions=[tc.TasksClient()]) as client:
            with anyio.fail_after(15):
                created = await tc.call(client, "run_tool_confirmed", SEND)
                assert isinstance(created, tc.CreatedTask), created
                await tc.cancel(client, created.task_id)
                state = await tc.get(client, created.task_id)
    assert state.status == "cancelled"
    [job] = all_jobs(platform)
    assert job.state == JobState.denied and job.reason == "withdrawn by the agent"


@pytest.mark.integration
async def test_stdio_task_outlives_the_bridge_process_that_made_it(
    platform: Platform, worker: Worker
) -> None:
    del worker
    params = aat_mcp_process(platform.settings)
    async with Client(params, mode=MODERN, extensions=[tc.TasksClient()]) as client:
        with anyio.fail_after(40):
            created = await tc.call(client, "run_tool_confirmed", SEND)
        [queued] = pending_for(platform=platform)
        # The card's preview runs in this bridge process: it ends once the preview is on the
        # card (a preview cut off with its process never lands, and an approval of a card
        # still saying "pending" comes back once for its preview, SPEC §20).
        await anyio.to_thread.run_sync(preview_landed, platform, int(queued["job"]))
    assert isinstance(created, tc.CreatedTask), created
    approve(platform, int(queued["job"]))
    # A new `aat mcp` (the client restarted it) polls the same task to its result.
    async with Client(params, mode=MODERN, extensions=[tc.TasksClient()]) as client:
        with anyio.fail_after(40):
            done = await poll_until_done(client, created.task_id)
    assert done.status == "completed"
    assert done.result is not None
    assert done.result["structuredContent"]["status"] == "succeeded"
    assert len(all_jobs(platform)) == 1
