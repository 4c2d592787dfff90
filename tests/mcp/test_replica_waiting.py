"""Waiting for an operator through replicas without stickiness: every request of the client
goes to the next of two `/mcp` servers on one database and one AAT_HOME, in turn.

A legacy session's URL elicitation (its answer reaches the other replica, which forwards it),
a 2026-07-28 call's sealed `requestState` retry, and a task polled with `tasks/get` on either
replica all end with the job run once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import anyio
import httpx2
import pytest
import tasks_client as tc
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import approve, body, later_when, serve_mcp
from platforms import platform_with
from test_native_waiting import PERSON_S, SEND, Elicitations, all_jobs

from webplatform.jobs.tracking import pending_for
from webplatform.platform import Platform
from webplatform.store.models import JobState
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next port in turn, as a balancer without stickiness does."""

    def __init__(self, ports: list[int]) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.ports = ports
        self.sent = 0
        self.hits: Counter[int] = Counter()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[self.sent % len(self.ports)]
        self.sent += 1
        self.hits[port] += 1
        request.url = request.url.copy_with(port=port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def two(platform: Platform) -> Iterator[tuple[Platform, str, RoundRobin]]:
    """Two replicas with a generous approval wait, and a round-robin transport over them."""
    slow = platform_with(platform.settings, approval_wait_s=30.0)
    with serve_mcp(slow) as first, serve_mcp(slow) as second:
        ports = [int(base.rsplit(":", 1)[1]) for base in (first, second)]
        yield slow, f"{first}/mcp", RoundRobin(ports)


def _approve_when_waiting(platform: Platform, asked: Elicitations | None = None) -> None:
    later_when(
        lambda: pending_for(platform=platform) and (asked is None or asked.asked),
        lambda: approve(platform, int(pending_for(platform=platform)[0]["job"])),
    )


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_url_elicitation_and_its_outcome_through_either_replica(
    two: tuple[Platform, str, RoundRobin], worker: Worker, era: str
) -> None:
    del worker
    platform, url, balancer = two
    asked = Elicitations("accept", after_s=PERSON_S)
    _approve_when_waiting(platform, asked)
    async with (
        httpx2.AsyncClient(transport=balancer, timeout=60) as http,
        Client(
            streamable_http_client(url, http_client=http), mode=era, elicitation_callback=asked
        ) as client,
    ):
        with anyio.fail_after(30):
            result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    assert answer["status"] == "succeeded", answer
    assert len(asked.asked) == 1 and asked.asked[0].url.endswith(f"/jobs/{answer['job']}")
    (job,) = all_jobs(platform)
    assert job.state == JobState.succeeded
    assert len(balancer.hits) == 2, balancer.hits  # both replicas served it


async def test_a_task_is_polled_on_either_replica(
    two: tuple[Platform, str, RoundRobin], worker: Worker
) -> None:
    del worker
    platform, url, balancer = two
    async with (
        httpx2.AsyncClient(transport=balancer, timeout=60) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode="2026-07-28",
            extensions=[tc.TasksClient()],
        ) as client,
    ):
        created = await tc.call(client, "run_tool_confirmed", SEND)
        assert isinstance(created, tc.CreatedTask), created
        _approve_when_waiting(platform)
        with anyio.fail_after(30):
            while (state := await tc.get(client, created.task_id)).status == "working":
                await anyio.sleep(0.1)
    assert state.status == "completed", state
    (job,) = all_jobs(platform)
    assert job.state == JobState.succeeded
    assert len(balancer.hits) == 2, balancer.hits
