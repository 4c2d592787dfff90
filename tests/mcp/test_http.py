"""The streamable-HTTP bridge on a real uvicorn server: both eras, Host/Origin checks, token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import ERAS, body, serve_mcp
from platforms import platform_with
from pydantic import SecretStr

from webplatform.config import Settings
from webplatform.platform import Platform

pytestmark = pytest.mark.anyio

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def url(platform: Platform) -> Iterator[str]:
    with serve_mcp(platform) as base:
        yield f"{base}/mcp"


@pytest.mark.parametrize("mode", ERAS)
async def test_sdk_client_over_http(url: str, mode: str) -> None:
    async with Client(url, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        ran = body(
            await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "H"}})
        )
        assert ran["result"] == {"greeting": "Hello, H!"}
        bad = await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": [1]}})
        assert bad.is_error is True and body(bad)["status"] == "invalid"


async def test_progress_reaches_http_clients_while_waiting(url: str) -> None:
    seen: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with Client(url, mode="auto") as client:
        assert client.session.discover_result is not None
        result = await client.call_tool(
            "run_tool_confirmed",
            {"tool": "outbox", "action": "delete-messages", "args": {}},
            progress_callback=on_progress,
        )
    assert body(result)["status"] == "pending_approval"
    assert seen


def post(url: str, payload: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(url, json=payload, headers={**HEADERS, **headers}, timeout=10)


def test_dns_rebinding_host_and_origin_are_refused(url: str) -> None:
    assert post(url, INIT, Host="evil.example:80").status_code == 421
    assert post(url, INIT, Origin="http://evil.example").status_code == 403
    assert post(url, INIT, Origin="http://localhost:1234").status_code == 200


def test_modern_unsupported_version_gets_32022_over_http(url: str) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2099-01-01",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    response = post(
        url,
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}},
        **{"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "server/discover"},
    )
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"]["requested"] == "2099-01-01" and error["data"]["supported"]


async def test_bearer_token_is_required_when_set(mcp_settings: Settings) -> None:
    guarded = platform_with(mcp_settings, mcp_token=SecretStr("s3cret-token"))
    with serve_mcp(guarded) as base:
        url = f"{base}/mcp"
        assert post(url, INIT).status_code == 401
        assert post(url, INIT, Authorization="Bearer wrong").status_code == 401
        http = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            tools = (await client.list_tools()).tools
    assert len(tools) == 7
