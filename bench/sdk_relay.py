"""The baseline for B9's `aat mcp --url`: the relay as it was before the thin one, on the SDK.

An SDK client session to the server's `/mcp` (bearer token from `AAT_AGENT_TOKEN`) and an SDK
server on stdio whose tool list and calls are forwarded to it, started the way `aat mcp --url`
started it (settings read with pydantic, stderr logging). Kept here, out of the product, so
`make bench` measures both relays side by side in the same run:
`python -m bench.sdk_relay URL`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
)

SERVER_NAME = "aat"


class RelayError(Exception):
    """The relay cannot reach a usable aat server; the message is one line saying how to fix it."""


class _Statuses:
    """Remembers the last HTTP status the server answered, to explain a refused connection."""

    def __init__(self) -> None:
        self.last: int | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        self.last = response.status_code


def _explain(url: str, token: str, statuses: _Statuses, exc: BaseException) -> str:
    """One line for why talking to `url` failed."""
    if statuses.last == 401:
        if not token:
            return (
                f"aat at {url} requires an agent token: set AAT_AGENT_TOKEN "
                "(an operator mints one with `aat agent add NAME`)"
            )
        return (
            f"aat at {url} refused AAT_AGENT_TOKEN (wrong or revoked): "
            "ask an operator for a new one (`aat agent add NAME`)"
        )
    if statuses.last is not None and statuses.last >= 400:
        return (
            f"{url} answered HTTP {statuses.last}: not an aat MCP endpoint "
            "(give the URL of `aat serve` ending in /mcp, e.g. http://127.0.0.1:8000/mcp)"
        )
    leaves = _leaves(exc)
    if any(isinstance(e, httpx2.TransportError) for e in leaves):
        return f"cannot reach aat at {url}: is `aat serve` running there? ({_first_line(leaves)})"
    return f"{url} did not answer as an aat MCP endpoint: {_first_line(leaves)}"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _first_line(leaves: list[BaseException]) -> str:
    text = str(leaves[0]) or type(leaves[0]).__name__
    return text.splitlines()[0] if text else type(leaves[0]).__name__


def _tool_error(message: str) -> CallToolResult:
    text = json.dumps({"status": "failed", "error": message}, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"status": "failed", "error": message},
        is_error=True,
    )


class Upstream:
    """The SDK client session to aat's `/mcp`, and what explains its failures."""

    def __init__(self, client: Client, *, url: str, token: str, statuses: _Statuses) -> None:
        self.client = client
        self.url = url
        self.token = token
        self.statuses = statuses

    def explain(self, exc: BaseException) -> str:
        """One line for why the last exchange with the server failed."""
        return _explain(self.url, self.token, self.statuses, exc)


@asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[Upstream]:
    """A session to aat's `/mcp` at `url`; RelayError (one line) when there is none to be had."""
    statuses = _Statuses()
    headers = {"Authorization": f"Bearer {token}"} if token else None
    http = create_mcp_http_client(headers=headers)
    http.event_hooks["response"].append(statuses)
    client = Client(streamable_http_client(url, http_client=http))
    async with http:
        try:
            await client.__aenter__()
        except Exception as exc:
            raise RelayError(_explain(url, token, statuses, exc)) from None
        try:
            info = client.server_info
            if info is None or info.name != SERVER_NAME:
                raise RelayError(
                    f"{url} is an MCP server named {info.name if info else None!r}, not aat: "
                    "give the URL of `aat serve` ending in /mcp"
                )
            yield Upstream(client, url=url, token=token, statuses=statuses)
        finally:
            await client.__aexit__(None, None, None)


def build_relay(upstream: Upstream) -> Server[Any]:
    """An SDK server whose `tools/list` and `tools/call` are forwarded to `upstream`."""
    client = upstream.client

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        del ctx
        return await client.list_tools(cursor=params.cursor if params else None)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        try:
            return await client.call_tool(
                params.name, params.arguments or {}, progress_callback=progress
            )
        except Exception as exc:
            return _tool_error(upstream.explain(exc))

    info = client.server_info
    return Server(
        SERVER_NAME,
        version=info.version if info is not None else "",
        instructions=client.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_relay(*, url: str, token: str) -> None:
    """Forward one stdio MCP client to aat at `url` until it hangs up."""
    async with connect(url, token) as upstream:
        server = build_relay(upstream)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


def run_relay(*, url: str, token: str) -> int:
    """Run the relay (blocking), for `aat mcp --url`; returns the exit code."""
    try:
        anyio.run(lambda: serve_relay(url=url, token=token))
    except RelayError as exc:
        sys.stderr.write(f"aat mcp --url: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def main(url: str) -> int:
    """`aat mcp --url URL` as it started before: settings, stderr logging, then the relay."""
    from webplatform.config import get_settings
    from webplatform.mcp.logs import configure_stderr_logging

    settings = get_settings()
    configure_stderr_logging()
    return run_relay(url=url, token=settings.agent_token.get_secret_value())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
