"""aat's own spans, children of the MCP request's: the approval wait, the tool's run, and a
call sent to an upstream MCP server (a CLIENT span the SDK's client passes on upstream as
`traceparent` in `params._meta`).

Every function is a no-op while tracing is off (`webplatform.telemetry.tracing()`), and
imports only the OpenTelemetry API (already loaded with the MCP SDK). Attributes are ids,
names, states and digests: never an argument's value or anything a tool printed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import webplatform
from webplatform.telemetry import tracing

__all__ = [
    "APPROVAL_WAIT",
    "RUN",
    "approval_wait",
    "current_context",
    "end",
    "failed",
    "run",
    "set_attributes",
    "upstream_call",
]

APPROVAL_WAIT = "aat.approval.wait"
RUN = "aat.run"


def _tracer() -> Any:
    from opentelemetry import trace

    return trace.get_tracer("aat", webplatform.__version__)


def _context_of(ids: tuple[str, str] | None) -> Any:
    """The context whose remote parent is the span `ids` names (trace id, span id), when no
    span is active here: a job run by a worker continues the trace of the call that asked."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    if trace.get_current_span().get_span_context().is_valid or ids is None:
        return None
    try:
        parent = SpanContext(
            trace_id=int(ids[0], 16),
            span_id=int(ids[1], 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    except ValueError:
        return None
    return trace.set_span_in_context(NonRecordingSpan(parent))


@contextlib.contextmanager
def run(attributes: Mapping[str, Any], parent: tuple[str, str] | None = None) -> Iterator[Any]:
    """`aat.run` around a tool's process, as long as it runs; yields the span (None when
    tracing is off). `parent` (trace id, span id) is used only when no span is active."""
    if not tracing():
        yield None
        return
    with _tracer().start_as_current_span(
        RUN, context=_context_of(parent), attributes=dict(attributes)
    ) as span:
        yield span


def current_context() -> Any:
    """This thread's trace context (None when tracing is off), for a span made in another
    thread to be its child (`upstream_call`)."""
    if not tracing():
        return None
    from opentelemetry import context

    return context.get_current()


@contextlib.contextmanager
def upstream_call(parent: Any, tool: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    """A CLIENT span `tools/call TOOL` around one call sent to an upstream MCP server, made
    current inside `parent` (`current_context()` of the thread that asked), so the SDK's
    client sends it upstream as `traceparent`; yields the span (None when tracing is off)."""
    if not tracing():
        yield None
        return
    from opentelemetry import context
    from opentelemetry.trace import SpanKind

    token = context.attach(parent) if parent is not None else None
    try:
        fixed = {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": tool,
            "gen_ai.operation.name": "execute_tool",
        }
        with _tracer().start_as_current_span(
            f"tools/call {tool}", kind=SpanKind.CLIENT, attributes={**fixed, **attributes}
        ) as span:
            yield span
    finally:
        if token is not None:
            context.detach(token)


@contextlib.contextmanager
def approval_wait(attributes: Mapping[str, Any]) -> Iterator[Any]:
    """`aat.approval.wait`, made current and left open: the caller ends it (`end`) at the
    moment the operator decided, which comes before the wait for the run ends."""
    if not tracing():
        yield None
        return
    span = _tracer().start_span(APPROVAL_WAIT, attributes=dict(attributes))
    try:
        yield span
    finally:
        if span.is_recording():
            span.end()


def set_attributes(span: Any, attributes: Mapping[str, Any]) -> None:
    """Set the attributes whose value is not None (a span refuses None)."""
    if span is not None:
        span.set_attributes({k: v for k, v in attributes.items() if v is not None})


def failed(span: Any, error_type: str) -> None:
    """Mark `span` failed with `error.type` (a low-cardinality word, never a message)."""
    if span is None or not span.is_recording():
        return
    from opentelemetry.trace import StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(StatusCode.ERROR)


def end(span: Any, at: datetime | None) -> None:
    """End `span` at `at` (now when None or not after its start)."""
    if span is None or not span.is_recording():
        return
    when = None if at is None else int(at.timestamp() * 1_000_000_000)
    start = getattr(span, "start_time", None)
    span.end(end_time=when if when is not None and start is not None and when > start else None)
