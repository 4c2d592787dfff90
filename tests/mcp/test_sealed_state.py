"""Sealed `input_required` state survives a restart: the key lives in AAT_HOME.

A 2026-07-28 client retries an `input_required` call with the state the bridge sealed. The
key is `AAT_HOME/mcp-state.key` (0600, made once), so a retry reaching a restarted bridge (or
another one with the same home) waits for the job like a normal call; a changed state gets
an error saying what to do.
"""

from __future__ import annotations

import stat
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_helpers import aat_mcp_process, body, connect, later
from mcp_types import INVALID_PARAMS, CallToolResult, ElicitResult, InputRequiredResult
from platforms import platform_with
from stepup_helpers import preview_landed
from test_native_waiting import SEND, Elicitations, all_jobs, approve_first_pending, job_page

from webplatform.mcp import sealing
from webplatform.platform import Platform
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
ACCEPTED = {"approval": ElicitResult(action="accept")}


async def first_round(client: Client) -> InputRequiredResult:
    result = await client.session.call_tool("run_tool_confirmed", SEND, allow_input_required=True)
    assert isinstance(result, InputRequiredResult), result
    assert result.request_state
    return result


async def retry(client: Client, state: str) -> CallToolResult:
    result = await client.session.call_tool(
        "run_tool_confirmed", SEND, input_responses=ACCEPTED, request_state=state
    )
    assert isinstance(result, CallToolResult), result
    return result


def test_the_key_is_made_once_private_and_kept(tmp_path: Any) -> None:
    home = tmp_path / "home"
    key = sealing.state_key(home)
    path = home / sealing.KEY_FILE
    assert len(key) == sealing.KEY_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sealing.state_key(home) == key, "a second process reads the same key"
    path.write_bytes(b"short")
    with pytest.raises(ValueError, match="not an aat sealing key .* move it away"):
        sealing.state_key(home)


def test_a_key_other_users_can_read_is_refused_with_the_fix(tmp_path: Any) -> None:
    home = tmp_path / "home"
    sealing.state_key(home)
    path = home / sealing.KEY_FILE
    path.chmod(0o640)
    with pytest.raises(ValueError, match=r"other users \(mode 0640\); run `chmod 600 .*`"):
        sealing.state_key(home)
    path.chmod(0o600)
    assert len(sealing.state_key(home)) == sealing.KEY_BYTES


async def test_a_retry_reaching_a_new_bridge_waits_and_gets_the_outcome(
    platform: Platform, worker: Worker
) -> None:
    del worker
    slow = platform_with(platform.settings, approval_wait_s=30.0)
    asked = Elicitations("accept")
    async with connect(slow, MODERN, elicitation_callback=asked) as client:
        asked_for = await first_round(client)
    # The bridge that sealed the state is gone; a new one (same AAT_HOME) gets the retry.
    later(1.0, lambda: approve_first_pending(platform))
    async with connect(slow, MODERN, elicitation_callback=asked) as client:
        with anyio.fail_after(30):
            answer = body(await retry(client, asked_for.request_state or ""))
    assert answer["status"] == "succeeded", answer
    assert len(all_jobs(platform)) == 1, "the retry does not queue a second job"


async def test_a_changed_state_gets_a_clear_error(platform: Platform) -> None:
    async with connect(platform, MODERN, elicitation_callback=Elicitations()) as client:
        asked_for = await first_round(client)
        state = asked_for.request_state or ""
        forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        with pytest.raises(MCPError) as raised:
            await retry(client, forged)
    assert raised.value.code == INVALID_PARAMS
    assert "Invalid or expired requestState" in raised.value.message
    assert "call the tool again without requestState" in raised.value.message
    assert len(all_jobs(platform)) == 1, "nothing more is queued"


async def test_state_sealed_under_another_home_is_refused(
    platform: Platform, tmp_path: Any
) -> None:
    async with connect(platform, MODERN, elicitation_callback=Elicitations()) as client:
        asked_for = await first_round(client)
    other_home = tmp_path.parent / f"{tmp_path.name}-other-home"
    other = platform_with(platform.settings, home=other_home)
    async with connect(other, MODERN, elicitation_callback=Elicitations()) as client:
        with pytest.raises(MCPError, match="another AAT_HOME"):
            await retry(client, asked_for.request_state or "")


@pytest.mark.integration
async def test_aat_mcp_restarted_between_the_rounds_still_answers_the_retry(
    platform: Platform, worker: Worker
) -> None:
    del worker
    params = aat_mcp_process(platform.settings, AAT_APPROVAL_WAIT_S="30")
    asked = Elicitations("accept")
    async with Client(params, mode=MODERN, elicitation_callback=asked) as client:
        with anyio.fail_after(40):
            asked_for = await first_round(client)
        # The card's preview lands while this bridge runs; one cut off by its exit is re-run
        # by the worker before the run and sends the call back for a second look.
        [queued] = all_jobs(platform)
        await anyio.to_thread.run_sync(preview_landed, platform, queued.id or 0)
    [request] = asked_for.input_requests.values()
    assert request.params.url == job_page(platform, queued.id or 0)  # type: ignore[union-attr]
    later(1.0, lambda: approve_first_pending(platform))
    async with Client(params, mode=MODERN, elicitation_callback=asked) as client:
        with anyio.fail_after(40):
            answer = body(await retry(client, asked_for.request_state or ""))
    assert answer["status"] == "succeeded", answer
    assert len(all_jobs(platform)) == 1
