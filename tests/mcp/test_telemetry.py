"""Traces of real MCP calls (SPEC §23), as a local OTLP/HTTP receiver decodes them.

Real `aat mcp` and `aat serve` processes, configured only by the standard `OTEL_*` variables,
send to a receiver in the test (`otlp_receiver`); an SDK client calls them with a known W3C
`traceparent` in `params._meta`, and an operator decides from the test, on the same database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp_helpers import aat_mcp_process, approve, body, deny, later_when
from otlp_receiver import Received, Span, otel_env, receiver
from serving import aat_env, aat_serve, free_port

from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs.tracking import pending_for
from webplatform.platform import Platform

Progress = Callable[[float, float | None, str | None], Awaitable[None]]

# Real processes on a loaded machine: more than the default two minutes for the slowest.
pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(300)]

TESTS = Path(__file__).resolve().parents[1]
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
META = {"traceparent": TRACEPARENT}
# Values that must never leave aat in a span, a metric or an audit line.
CANARY = "canary-argument-7f3e"
METRICS_TOKEN = "metrics-token-0b7a"
SECRET = "secret-token-91c2"
SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": CANARY, "body": "hi"},
}
HELLO = {"tool": "hello-world", "args": {"name": "x"}}
ECHO = {"tool": "echo", "action": "echo", "args": {"text": CANARY, "token": SECRET}}


@pytest.fixture
def platform_settings(mcp_settings: Settings, tmp_path: Path) -> Settings:
    """The example registry and the test fixtures' tools (a failing one, a secret argument)."""
    return mcp_settings.model_copy(update={"registry": f"{EXAMPLES_ROOT}:{TESTS}"})


@pytest.fixture
def collector() -> Iterator[tuple[str, Received]]:
    """The OTLP/HTTP receiver aat's processes send to."""
    with receiver() as found:
        yield found


def process_env(settings: Settings, url: str | None) -> dict[str, str]:
    """An `aat` process's environment on the test's home, database and registry; sending to
    the receiver at `url` (None: no OTEL_* variable at all)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AAT_", "OTEL_"))}
    env.update(
        AAT_HOME=str(settings.home),
        AAT_DB_URL=settings.db_url.get_secret_value(),
        AAT_REGISTRY=settings.registry,
        AAT_WORKSPACES=settings.workspaces,
        AAT_APPROVAL_WAIT_S="90",
    )
    return {**env, **(otel_env(url) if url else {})}


@pytest.fixture
def worker_process(platform: Platform, collector: tuple[str, Received]) -> Iterator[None]:
    """An `aat worker` process sending its traces too: it runs what an operator approved."""
    env = process_env(platform.settings, collector[0])
    log = platform.settings.home / "worker.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "webplatform", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    try:
        # Started before any call: a loaded machine's slow start is no part of the wait.
        deadline = time.monotonic() + 60
        while " started" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.05)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def decide_first_pending(platform: Platform, *, approved: bool) -> Progress:
    """An operator approves (or denies) the call waiting once its client has seen it wait (a
    progress notification): a decision landing before the call waits is no wait to trace.
    Returns the progress callback to give that call."""
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    def decide() -> None:
        job = int(pending_for(platform=platform)[0]["job"])
        if approved:
            approve(platform, job)
        else:
            deny(platform, job, "not today")

    later_when(lambda: seen and pending_for(platform=platform), decide)
    return progress


def only(spans: list[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def audit_digest(platform: Platform, job_id: int) -> str:
    """The digest the audit export records for a job's call (`kind name action sha256:D`)."""
    rows = platform.audit.export(None)
    created = next(r for r in rows if r["job_id"] == job_id and r["event"] == "created")
    return str(created["detail"]).rsplit("sha256:", 1)[1]


def check_request_span(span: Span, *, tool: str, transport: str) -> None:
    """The MCP server span as the conventions name it, under the caller's `traceparent`."""
    assert span.name == f"tools/call {tool}"
    assert span.trace_id == TRACE_ID and span.parent_span_id == PARENT_ID
    assert span.kind == 2  # SERVER
    attributes = span.attributes
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == tool
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["jsonrpc.request.id"]
    assert attributes["mcp.protocol.version"] == "2025-11-25"
    assert attributes["network.transport"] == transport


async def test_an_approved_stdio_call_is_traced_from_the_agents_span_to_the_tools_process(
    platform: Platform, collector: tuple[str, Received], worker_process: None
) -> None:
    url, received = collector
    params = aat_mcp_process(platform.settings)
    params.env = process_env(platform.settings, url)
    progress = decide_first_pending(platform, approved=True)
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool(
            "run_tool_confirmed", SEND, meta=META, progress_callback=progress
        )
    answer = body(result)
    assert answer["status"] == "succeeded", answer
    spans = received.wait_for(lambda s: {"aat.run", "aat.approval.wait"} <= {x.name for x in s})
    call = only(spans, "tools/call run_tool_confirmed")
    check_request_span(call, tool="run_tool_confirmed", transport="pipe")
    assert "mcp.session.id" not in call.attributes  # stdio has no session id
    assert "error.type" not in call.attributes
    wait = only(spans, "aat.approval.wait")
    assert (wait.trace_id, wait.parent_span_id) == (TRACE_ID, call.span_id)
    assert wait.attributes["aat.job.id"] == answer["job"]
    assert wait.attributes["aat.approval.status"] == "approved"
    assert wait.attributes["aat.approval.approver"] == "olga"
    assert wait.attributes["aat.args.digest"] == audit_digest(platform, answer["job"])
    assert wait.end_ns <= call.end_ns
    # The tool's process ran in the worker, a child of the agent's call all the same.
    run = only(spans, "aat.run")
    assert (run.trace_id, run.parent_span_id) == (TRACE_ID, call.span_id)
    assert run.attributes["aat.job.id"] == answer["job"]
    assert run.attributes["aat.job.state"] == "succeeded"
    assert run.start_ns >= wait.end_ns - 50_000_000  # it ran after the decision
    # The audit events recorded inside the call's span name its trace.
    rows = platform.audit.export(None)
    traced = {r["event"] for r in rows if r["job_id"] == answer["job"] and r["trace_id"]}
    assert {"created", "finished"} <= traced, rows
    assert all(r["trace_id"] in (None, TRACE_ID) for r in rows)


async def test_http_calls_carry_the_session_a_denial_and_a_failing_tool(
    platform: Platform, collector: tuple[str, Received], tmp_path: Path
) -> None:
    url, received = collector
    env = aat_env(None, **process_env(platform.settings, url), AAT_METRICS_TOKEN=METRICS_TOKEN)
    port = free_port()
    with aat_serve(env=env, port=port, log=tmp_path / "serve.log") as base:
        progress = decide_first_pending(platform, approved=False)
        async with Client(f"{base}/mcp", mode="legacy") as client:
            denied = await client.call_tool(
                "run_tool_confirmed", SEND, meta=META, progress_callback=progress
            )
            crashed = await client.call_tool(
                "run_tool", {"tool": "misbehave", "action": "crash"}, meta=META
            )
        bearer = {"Authorization": f"Bearer {METRICS_TOKEN}"}
        scraped = httpx.get(f"{base}/metrics", headers=bearer)
    assert scraped.status_code == 200
    # The requests this `aat serve` answered, timed, with the conventions' attributes.
    failed_runs = (
        'mcp_server_operation_duration_seconds_count{error_type="tool_error",'
        'gen_ai_tool_name="run_tool",mcp_method_name="tools/call"} 1.0'
    )
    assert failed_runs in scraped.text
    # What the database holds for every process: this denial was decided by another one.
    assert 'aat_jobs_total{outcome="denied"} 1.0' in scraped.text
    assert 'aat_jobs_total{outcome="failed"} 1.0' in scraped.text
    assert CANARY not in scraped.text
    assert body(denied)["status"] == "denied" and body(crashed)["status"] == "failed"
    spans = received.wait_for(
        lambda s: (
            {"aat.approval.wait", "aat.run"} <= {x.name for x in s}
            and sum(x.name.startswith("tools/call") for x in s) >= 2
        )
    )
    call = only(spans, "tools/call run_tool_confirmed")
    check_request_span(call, tool="run_tool_confirmed", transport="tcp")
    assert call.attributes["mcp.session.id"]
    assert call.attributes["error.type"] == "tool_error"  # denied: isError
    wait = only(spans, "aat.approval.wait")
    assert wait.parent_span_id == call.span_id
    assert wait.attributes["aat.approval.status"] == "denied"
    assert wait.attributes["aat.approval.approver"] == "olga"
    assert wait.attributes["aat.args.digest"] == audit_digest(platform, body(denied)["job"])
    # Metrics through OTLP too: request durations, and the approvals pending as the
    # database holds them (only `aat serve` reports those).
    names = {"mcp.server.operation.duration", "aat.approvals.pending"}
    received.wait_for(lambda _: names <= {name for name, _ in received.metrics})
    failing = only(spans, "tools/call run_tool")
    check_request_span(failing, tool="run_tool", transport="tcp")
    assert failing.attributes["error.type"] == "tool_error"
    run = only(spans, "aat.run")
    assert run.parent_span_id == failing.span_id
    assert run.attributes["error.type"] == "failed"


async def test_no_otel_variables_send_nothing_and_load_no_sdk(
    platform: Platform, collector: tuple[str, Received]
) -> None:
    url, received = collector
    params = aat_mcp_process(platform.settings)
    params.env = process_env(platform.settings, None)
    async with Client(params, mode="legacy") as client:
        ran = await client.call_tool("run_tool", HELLO, meta=META)
    assert body(ran)["status"] == "succeeded"
    code = (
        "import sys, json; from webplatform import telemetry; import webplatform.cli.daemons, "
        "webplatform.mcp.server, webplatform.jobs.execution, webplatform.store.audit; "
        "telemetry.start(); print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=process_env(platform.settings, None),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded = json.loads(done.stdout)
    assert not [m for m in loaded if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))]
    # The bridge has exited (a tracing one flushes its spans as it exits): nothing was sent.
    assert received.raw == []


async def test_no_argument_value_or_secret_leaves_in_a_span_or_metric(
    platform: Platform, collector: tuple[str, Received], worker_process: None
) -> None:
    url, received = collector
    params = aat_mcp_process(platform.settings)
    params.env = process_env(platform.settings, url)
    progress = decide_first_pending(platform, approved=True)
    async with Client(params, mode="legacy") as client:
        echoed = await client.call_tool("run_tool", ECHO, meta=META)
        sent = await client.call_tool(
            "run_tool_confirmed", SEND, meta=META, progress_callback=progress
        )
    assert body(echoed)["status"] == "succeeded" and body(sent)["status"] == "succeeded"
    received.wait_for(lambda s: len([x for x in s if x.name == "aat.run"]) == 2)
    received.wait_for(
        lambda s: any(name == "mcp.server.operation.duration" for name, _ in received.metrics)
    )
    trail = subprocess.run(
        [sys.executable, "-m", "webplatform", "audit", "tail", "--since", "2000-01-01"],
        env=process_env(platform.settings, None),
        capture_output=True,
        timeout=60,
        check=True,
    ).stdout
    assert len(trail.splitlines()) >= 6  # both calls' events, each on its line
    everything = b"".join(received.raw) + trail
    assert CANARY.encode() not in everything
    assert SECRET.encode() not in everything
