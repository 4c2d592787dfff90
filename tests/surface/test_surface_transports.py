"""Both surfaces side by side over real transports: stdio processes and `aat serve`'s HTTP app."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters
from surface_helpers import ERAS, EXAMPLE_NAMES, action, body, edit_manifest, serve

from webplatform.config import Settings

pytestmark = pytest.mark.anyio

GENERIC_NAMES = {"capabilities", "run_tool", "run_tool_confirmed", "job_status"}


def bridge(home: Path, root: Path, *surface: str) -> StdioServerParameters:
    env = {**os.environ, "AAT_HOME": str(home), "AAT_APPROVAL_WAIT_S": "1"}
    args = ["-m", "webplatform", "mcp", "--registry", str(root), *surface]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.integration
async def test_both_surfaces_over_stdio(tmp_path: Path, root: Path, mode: str) -> None:
    home = tmp_path / "home"
    async with (
        Client(bridge(home, root), mode=mode) as generic,
        Client(bridge(home, root, "--surface", "chat"), mode=mode) as chat,
    ):
        generic_names = {t.name for t in (await generic.list_tools()).tools}
        chat_names = sorted(t.name for t in (await chat.list_tools()).tools)
        via_chat = body(await chat.call_tool("demo_hello-world_greet", {"name": "chat"}))
        via_generic = body(await generic.call_tool("run_tool", {
            "tool": "hello-world", "args": {"name": "generic"},
        }))  # fmt: skip
    assert generic_names >= GENERIC_NAMES and not generic_names & set(chat_names)
    assert chat_names == EXAMPLE_NAMES
    assert via_chat["result"] == {"greeting": "Hello, chat!"}
    assert via_generic["result"] == {"greeting": "Hello, generic!"}
    assert via_chat["job"] != via_generic["job"]  # one database, two doors


@pytest.mark.integration
def test_a_drifted_chat_surface_will_not_start(tmp_path: Path, root: Path) -> None:
    edit_manifest(root, "xlsx", lambda d: action(d, "list-sheets").update(name="sheets"))
    params = bridge(tmp_path / "home", root, "--surface", "chat")
    done = subprocess.run(
        [params.command, *params.args], env=params.env, input="", capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert "disagrees with the registry" in done.stderr and "missing-action" not in done.stdout
    assert "has no action 'list-sheets'" in done.stderr


@pytest.mark.parametrize("mode", ERAS)
async def test_both_surfaces_over_http(base_url: str, mode: str) -> None:
    async with (
        Client(f"{base_url}/mcp", mode=mode) as generic,
        Client(f"{base_url}/mcp/chat", mode=mode) as chat,
    ):
        generic_names = {t.name for t in (await generic.list_tools()).tools}
        chat_names = sorted(t.name for t in (await chat.list_tools()).tools)
        ran = body(await chat.call_tool("office_xlsx_list-sheets", {"path": "/nonexistent.xlsx"}))
        greet = body(await chat.call_tool("demo_hello-world_greet", {"name": "http"}))
    assert generic_names >= GENERIC_NAMES and chat_names == EXAMPLE_NAMES
    assert ran["status"] == "failed" and ran["tool"] == "xlsx"  # the tool's own failure, as is
    assert greet["result"] == {"greeting": "Hello, http!"}


async def test_http_discover_reports_the_chat_identity_and_digest(base_url: str) -> None:
    async with Client(f"{base_url}/mcp/chat", mode="auto") as chat:
        discovered = chat.session.discover_result
    async with Client(f"{base_url}/mcp", mode="auto") as generic:
        generic_discovered = generic.session.discover_result
    assert discovered is not None and discovered.meta is not None
    assert generic_discovered is not None and generic_discovered.meta is not None
    assert discovered.meta["aat/surfaceVersion"] == "1.0.0"
    assert discovered.meta["aat/toolsDigest"] != generic_discovered.meta["aat/toolsDigest"]


def test_chat_http_keeps_the_host_check(base_url: str) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream", "Host": "evil.example"}
    response = httpx.post(f"{base_url}/mcp/chat", json=init, headers=headers, timeout=10)
    assert response.status_code in (400, 421)


def test_a_drifted_chat_surface_is_off_but_serve_still_runs(
    chat_settings: Settings, root: Path
) -> None:
    edit_manifest(root, "hello-world", lambda d: action(d, "greet").update(read_only=False))
    with serve(chat_settings) as url:
        off = httpx.post(f"{url}/mcp/chat", json={}, timeout=10)
        healthy = httpx.get(f"{url}/healthz", timeout=10)
    assert off.status_code == 503 and "the chat surface is off" in off.json()["error"]
    assert healthy.status_code == 200
