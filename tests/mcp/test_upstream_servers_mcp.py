"""An upstream MCP server's accepted tools through aat's own MCP bridge (SPEC §22): listed
and searched by `capabilities` like any tool, read-only ones run by `run_tool`, the others
refused there with `approval_required`, results masked; in both protocol eras."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
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
