"""The dashboard's registry search and MCP `capabilities {search}` answer one query alike:
an operator and an agent get the same actions and skills (one rule, one index)."""

from __future__ import annotations

import re

import anyio
from fastapi.testclient import TestClient
from mcp import Client

from webplatform.mcp import build_server
from webplatform.platform import Platform
from webplatform.store.models import Surface

# Plurals, hyphenated words and several words: where a plain substring search and the word
# index used to disagree (`messages` finds `send-message`, `send-message` finds it too).
QUERIES = ["send", "messages", "send-message", "sheets", "list sheet", "summaries", "approval"]
HIT = re.compile(r'<span class="kind">(\w+)</span>\s*<a href="[^"]*"><code>([^<]+)</code>')

Found = set[tuple[str, str, str | None]]


def page_hits(browser: TestClient, query: str) -> Found:
    """The actions and skills the registry page lists for `query` (not whole tools: MCP
    search lists actions, and a tool's own hit only links to its page)."""
    html = browser.get("/registry", params={"q": query}, headers={"HX-Request": "true"}).text
    found: Found = set()
    for kind, label in HIT.findall(html):
        name, _, action = label.partition(" ")
        if action or kind == "skill":
            found.add((kind, name, action or None))
    return found


async def mcp_hits(platform: Platform, queries: list[str]) -> dict[str, Found]:
    """What `capabilities {search}` finds for each query, over the SDK's in-memory client."""
    out: dict[str, Found] = {}
    async with Client(build_server(platform, surface=Surface.mcp_stdio)) as client:
        for query in queries:
            result = await client.call_tool("capabilities", {"search": query})
            assert result.structured_content is not None
            matches = result.structured_content["matches"]
            out[query] = {(m["kind"], m["name"], m.get("action")) for m in matches}
    return out


def test_dashboard_and_capabilities_search_find_the_same(
    alice: TestClient, platform: Platform
) -> None:
    by_mcp = anyio.run(mcp_hits, platform, QUERIES)
    for query in QUERIES:
        assert page_hits(alice, query) == by_mcp[query], query
    # The queries are not vacuous: a plural finds the singular, on both surfaces.
    assert ("tool", "outbox", "send-message") in by_mcp["messages"]
    assert ("tool", "xlsx", "list-sheets") in by_mcp["sheets"]
