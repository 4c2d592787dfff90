"""An upstream MCP server's accepted tools through aat's own MCP bridge (SPEC §22): listed
and searched by `capabilities` like any tool, read-only ones run by `run_tool`, the others
refused there with `approval_required`, results masked; in both protocol eras."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.shared.subscriptions import ToolsListChanged
from mcp_helpers import body, connect

from webplatform import servers
from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.process import server_pool

UPSTREAM = Path(__file__).resolve().parents[1] / "servers" / "upstream.py"
SECRET = "mcp-upstream-secret-value"
pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _fresh_pool() -> Iterator[None]:
    server_pool.POOL.stop_all()
    yield
    server_pool.POOL.stop_all()


@pytest.fixture
def upstream_platform(
    mcp_settings: Settings, registry_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Platform]:
    """The bridge's platform with server `up` beside the test tools, its tools accepted."""
    defs = tmp_path.parent / f"{tmp_path.name}-defs"
    defs.mkdir()
    (defs / "peek.txt").write_text("Show the token")
    (registry_root / "servers" / "up").mkdir(parents=True)
    (registry_root / "servers" / "up" / "server.yaml").write_text(
        "name: up\ndescription: A small upstream server\n"
        f"command: [{sys.executable}, {UPSTREAM}, {defs / 'peek.txt'}]\n"
        f"secrets: [SECRET_TOKEN]\nreads: [{UPSTREAM.parent}, {defs}]\n"
    )
    monkeypatch.setenv("SECRET_TOKEN", SECRET)
    platform = Platform(mcp_settings.model_copy(update={"registry": str(registry_root)}))
    servers.refresh(platform, servers.find(platform, "up"), tmp_path)
    servers.accept(platform, "up", by="ada")
    yield platform
    platform.engine.dispose()


async def test_server_tools_are_discovered_and_called_like_any_tool(
    upstream_platform: Platform, era: str
) -> None:
    async with connect(upstream_platform, era) as client:
        listed = body(await client.call_tool("capabilities", {}))
        found = body(await client.call_tool("capabilities", {"search": "token"}))
        shape = body(await client.call_tool("capabilities", {"name": "up", "action": "note"}))
        peek = await client.call_tool("run_tool", {"tool": "up", "action": "peek"})
        note = await client.call_tool(
            "run_tool", {"tool": "up", "action": "note", "args": {"folder": ".", "text": "x"}}
        )
    assert "up" in {t["name"] for t in listed["tools"]}
    assert "peek" in str(found)
    assert shape["reversibility"] == "irreversible"
    assert {a["name"] for a in shape["args"]} == {"folder", "text"}
    assert set(shape["input_schema"]["properties"]) == {"folder", "text"}
    answer = body(peek)
    assert answer["status"] == "succeeded" and "token is" in str(answer)
    assert SECRET not in str(answer)
    assert body(note)["status"] == "approval_required"


EVERYTHING = (
    Path(__file__).resolve().parent
    / "node"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-everything"
    / "dist"
    / "index.js"
)


@pytest.fixture
def everything_platform(
    mcp_settings: Settings, registry_root: Path, tmp_path: Path
) -> Iterator[Platform]:
    """The bridge's platform with the real `@modelcontextprotocol/server-everything` over
    stdio (confined), its tools accepted."""
    (registry_root / "servers" / "everything").mkdir(parents=True)
    (registry_root / "servers" / "everything" / "server.yaml").write_text(
        "name: everything\ndescription: The reference test server\n"
        f"command: [node, {EVERYTHING}, stdio]\nreads: [{EVERYTHING.parents[3]}]\n"
    )
    platform = Platform(mcp_settings.model_copy(update={"registry": str(registry_root)}))
    servers.refresh(platform, servers.find(platform, "everything"), tmp_path)
    servers.accept(platform, "everything", by="ada")
    yield platform
    platform.engine.dispose()


@pytest.mark.integration
async def test_an_upstream_servers_progress_reaches_the_agent_as_its_own(
    everything_platform: Platform, era: str
) -> None:
    """The long-running tool reports each of its steps; the agent calling through aat sees
    them as progress on its own `run_tool` request, in order, with the upstream's total."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect(everything_platform, era) as client:
        result = await client.call_tool(
            "run_tool",
            {
                "tool": "everything",
                "action": "trigger-long-running-operation",
                "args": {"duration": 1.5, "steps": 3},
            },
            progress_callback=on_progress,
        )
    answer = body(result)
    assert answer["status"] == "succeeded" and "Steps: 3" in str(answer)
    values = [value for value, _, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values)
    # The upstream's steps, each as "n of 3" (shifted past any note aat sent before them);
    # aat's own notes ("running ...") only nudge the value meanwhile.
    upstream = [
        (v, t) for v, t, said in seen if t is not None and not (said or "").startswith("running")
    ]
    steps = [total - value for value, total in upstream]
    assert steps == pytest.approx([2.0, 1.0, 0.0])


async def test_a_listening_agent_is_told_when_an_upstream_servers_tools_change(
    upstream_platform: Platform,
) -> None:
    """The upstream server changes its tools while it runs: an agent listening for tool list
    changes (2026-07-28) is told, and `capabilities` no longer offers what is now held."""
    async with connect(upstream_platform, "2026-07-28") as client:
        async with client.listen(tools_list_changed=True) as events:
            grown = body(await client.call_tool("run_tool", {"tool": "up", "action": "grow"}))
            assert grown["status"] == "succeeded"
            with anyio.fail_after(20):
                event = await anext(aiter(events))
        shape = body(await client.call_tool("capabilities", {"name": "up"}))
    assert isinstance(event, ToolsListChanged)
    offered = {a["name"] for a in shape["actions"]}
    assert "read" in offered and "peek" not in offered and "fresh" not in offered
    assert set(upstream_platform.registry().held["up"]) == {"fresh", "peek"}
