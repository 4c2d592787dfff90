"""Native waiting over the real transports: `aat mcp` on stdio and `/mcp` on uvicorn, both eras."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client
from mcp_helpers import ERAS, aat_mcp_process, body, later_when, serve_mcp
from platforms import platform_with
from test_native_waiting import (
    PERSON_S,
    SEND,
    Elicitations,
    all_jobs,
    approve_first_pending,
    job_page,
)

from webplatform.jobs.tracking import job_state
from webplatform.platform import Platform
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ERAS)
async def test_http_client_opens_the_job_page_then_gets_the_outcome(
    platform: Platform, worker: Worker, mode: str
) -> None:
    del worker
    slow = platform_with(platform.settings, approval_wait_s=30.0)
    asked = Elicitations("accept")
    later_when(lambda: asked.asked, lambda: approve_first_pending(platform))
    with serve_mcp(slow) as base:
        async with Client(f"{base}/mcp", mode=mode, elicitation_callback=asked) as client:
            with anyio.fail_after(30):
                result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    assert answer["status"] == "succeeded", answer
    assert [p.url for p in asked.asked] == [job_page(platform, answer["job"])]
    assert len(all_jobs(platform)) == 1


@pytest.mark.parametrize("mode", ERAS)
async def test_http_client_whose_person_closes_the_dialog_gets_pending_approval(
    platform: Platform, mode: str
) -> None:
    slow = platform_with(platform.settings, approval_wait_s=30.0)
    asked = Elicitations("cancel", after_s=PERSON_S)
    with serve_mcp(slow) as base:
        async with Client(f"{base}/mcp", mode=mode, elicitation_callback=asked) as client:
            with anyio.fail_after(15):
                result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    assert answer["status"] == "pending_approval", answer
    assert len(asked.asked) == 1
    assert job_state(platform=platform, job_id=answer["job"]).value == "pending_approval"  # type: ignore[union-attr]


@pytest.mark.integration
@pytest.mark.parametrize("mode", ERAS)
async def test_stdio_bridge_process_elicits_the_job_page(
    platform: Platform, worker: Worker, mode: str
) -> None:
    del worker
    params = aat_mcp_process(platform.settings, AAT_APPROVAL_WAIT_S="30")
    asked = Elicitations("accept")
    # Once the dialog was asked for: a bridge process that starts slowly must still ask.
    later_when(lambda: asked.asked, lambda: approve_first_pending(platform))
    async with Client(params, mode=mode, elicitation_callback=asked) as client:
        with anyio.fail_after(40):
            result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    assert answer["status"] == "succeeded", answer
    assert [p.url for p in asked.asked] == [job_page(platform, answer["job"])]
    assert len(all_jobs(platform)) == 1
