"""A real `aat mcp` answers a call whose preview hangs as fast as one without a preview
(SPEC §16: a preview never delays the queue); closing it stops its previews at once, each
process killed and its row told why."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mcp import Client
from mcp_helpers import aat_mcp_process, body

from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import previews
from webplatform.platform import Platform
from webplatform.store import previews as preview_rows

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TESTS = Path(__file__).resolve().parents[1]
PREVIEW_TIMEOUT_S = 30


def hanging_previews(marker: str) -> list[int]:
    """The pids of preview processes still running with `marker` in their command line."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"hang" in cmdline and marker.encode() in cmdline:
            found.append(int(proc.name))
    return found


async def timed_call(client: Client, action: str, marker: str) -> float:
    started = time.monotonic()
    args = {"tool": "previewed", "action": action, "args": {"text": marker}}
    answer = body(await client.call_tool("run_tool_confirmed", args))
    took = time.monotonic() - started
    assert answer["status"] == "pending_approval", answer
    return took


async def test_a_hanging_preview_does_not_slow_the_pending_answer(
    platform: Platform, mcp_settings: Settings, tmp_path: Path
) -> None:
    marker = f"preview-{tmp_path.name}"
    params = aat_mcp_process(
        mcp_settings,
        AAT_REGISTRY=f"{TESTS}:{EXAMPLES_ROOT}",
        AAT_APPROVAL_WAIT_S="0.3",
        AAT_PREVIEW_TIMEOUT_S=str(PREVIEW_TIMEOUT_S),
    )
    plain: list[float] = []
    hanging: list[float] = []
    async with Client(params, mode="legacy") as client:
        await timed_call(client, "send-plain", marker)  # the first call warms the bridge up
        for _ in range(3):
            plain.append(await timed_call(client, "send-plain", marker))
            hanging.append(await timed_call(client, "send-hang", marker))
        assert len(hanging_previews(marker)) == 3
    assert max(hanging) < min(plain) + 1.0, (plain, hanging)
    # Closing the bridge stopped its previews before it exited: none is left running, and
    # each row says why it has no answer.
    assert hanging_previews(marker) == []
    rows = platform.transact(
        lambda s: preview_rows.preview_heads(session=s, job_ids=range(1, 20), head_chars=10)
    )
    assert (
        sorted((p.row.state, p.row.error) for p in rows.values())
        == [("failed", previews.STOPPED)] * 3
    )
