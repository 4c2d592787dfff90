"""A call aat sends to an upstream MCP server, traced (SPEC §23 with §22): a real `aat mcp`
process configured by the standard `OTEL_*` variables sends its spans to a local OTLP/HTTP
receiver (`otlp_receiver`); the upstream server of our own (tests/servers/upstream.py)
answers the `traceparent` it received."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp_helpers import aat_mcp_process, body
from otlp_receiver import Span, otel_env, receiver

from webplatform import servers
from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.process import server_pool

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(300)]

UPSTREAM = Path(__file__).resolve().parents[1] / "servers" / "upstream.py"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
META = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
CLIENT = 3  # SpanKind.CLIENT in OTLP


@pytest.fixture
def platform_settings(mcp_settings: Settings, tmp_path: Path) -> Settings:
    """A registry with server `up` only."""
    root, defs = tmp_path.parent / f"{tmp_path.name}-registry", tmp_path.parent / "defs"
    (root / "servers" / "up").mkdir(parents=True)
    defs.mkdir(exist_ok=True)
    (defs / "peek.txt").write_text("Show the token")
    (root / "servers" / "up" / "server.yaml").write_text(
        "name: up\ndescription: A small upstream server\n"
        f"command: [{sys.executable}, {UPSTREAM}, {defs / 'peek.txt'}]\n"
        f"reads: [{UPSTREAM.parent}, {defs}]\n"
    )
    return mcp_settings.model_copy(update={"registry": str(root)})


@pytest.fixture
def accepted(platform: Platform, tmp_path: Path) -> Iterator[Platform]:
    """Server `up` seen and accepted by an admin (its process stopped again)."""
    servers.refresh(platform, servers.find(platform, "up"), tmp_path)
    servers.accept(platform, "up", by="ada")
    server_pool.POOL.stop_all()
    yield platform


def ancestry(spans: list[Span], span: Span) -> list[str]:
    """The names of `span`'s parents, nearest first, as far as the receiver has them."""
    by_id = {s.span_id: s for s in spans}
    names: list[str] = []
    while (parent := by_id.get(span.parent_span_id)) is not None:
        names.append(parent.name)
        span = parent
    return names


async def test_an_upstream_call_is_a_client_span_under_the_agents_and_passes_it_on(
    accepted: Platform,
) -> None:
    with receiver() as (url, received):
        params = aat_mcp_process(accepted.settings)
        params.env = {
            **{k: v for k, v in (params.env or os.environ).items() if not k.startswith("OTEL_")},
            "AAT_REGISTRY": accepted.settings.registry,
            **otel_env(url),
        }
        async with Client(params, mode="legacy") as client:
            result = await client.call_tool(
                "run_tool", {"tool": "up", "action": "traced"}, meta=META
            )
        answer = body(result)
        assert answer["status"] == "succeeded", str(answer)
        spans = received.wait_for(lambda s: any(x.name == "tools/call traced" for x in s))
    call = next(s for s in spans if s.name == "tools/call traced")
    assert call.kind == CLIENT and call.trace_id == TRACE_ID
    assert call.attributes["mcp.method.name"] == "tools/call"
    assert call.attributes["gen_ai.tool.name"] == "traced"
    assert call.attributes["aat.server"] == "up"
    assert call.attributes["network.transport"] == "pipe"
    request = next(s for s in spans if s.name == "tools/call run_tool")
    assert request.parent_span_id == PARENT_ID
    assert "tools/call run_tool" in ancestry(spans, call)  # the agent's request holds it
    # What the upstream server received: the same trace, and a span of aat's client call
    # (or the SDK's send within it) as its parent.
    sent = str(answer["result"]).split(f"00-{TRACE_ID}-", 1)
    assert len(sent) == 2, answer
    parent_id = sent[1][:16]
    sent_from = next(s for s in spans if s.span_id == parent_id)
    assert sent_from is call or "tools/call traced" in ancestry(spans, sent_from)
