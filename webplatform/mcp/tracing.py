"""Traces of MCP requests (SPEC §23): the SDK's span per request, completed; the approval wait.

The MCP SDK makes one server span per request following the MCP semantic conventions
(`mcp.server._otel.OpenTelemetryMiddleware`, first on every server's middleware): its name is
`{mcp.method.name} {target}`, it carries the method, tool, operation, request id, protocol
version and `error.type`, and its parent comes from `params._meta.traceparent`. It costs a
no-op span until `webplatform.telemetry.start` sets a tracer provider. What only aat knows is
added here, inside that span: the transport and the HTTP session, and the approval wait.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from webplatform import telemetry
from webplatform.jobs.answers import Answer, Status
from webplatform.platform import Platform
from webplatform.store.models import Surface
from webplatform.telemetry import metrics, spans
from webplatform.trust import claims

__all__ = ["approval_wait", "install"]


def install(server: MCPServer, surface: Surface) -> None:
    """Complete the SDK's request spans with what this surface knows, and time each request
    for the metrics; nothing at all when this process neither traces nor records metrics."""
    if telemetry.tracing() or metrics.recording():
        server.middleware.append(_observed(server, surface))


def session_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The MCP session this request belongs to (HTTP sessions only), or None."""
    connection = getattr(ctx.session, "_connection", None)  # the SDK keeps it unexported
    found = getattr(connection, "session_id", None)
    if found is None:
        headers = getattr(ctx.request, "headers", None)
        found = headers.get("mcp-session-id") if headers is not None else None
    return found if isinstance(found, str) else None


def _observed(server: MCPServer, surface: Surface) -> Callable[..., Any]:
    transport = "pipe" if surface is Surface.mcp_stdio else "tcp"
    served: set[str] = set()  # the tool names this server offers, read at its first call

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if telemetry.tracing():
            _describe(ctx, transport)
        if not metrics.recording():
            return await call_next(ctx)
        if ctx.method == "tools/call" and not served:
            served.update(tool.name for tool in await server.list_tools())
        began, error = time.perf_counter(), None
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            error = str(exc.error.code)
            raise
        except Exception as exc:
            error = type(exc).__qualname__
            raise
        else:
            if isinstance(result, dict | CallToolResult) and _is_error(result):
                error = "tool_error"
            return result
        finally:
            labels = _labels(ctx, transport, error, served)
            metrics.operation(labels, time.perf_counter() - began)

    return middleware


def _describe(ctx: ServerRequestContext[Any, Any], transport: str) -> None:
    """The transport and session on the SDK's span for this request."""
    from opentelemetry import trace

    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.set_attribute("network.transport", transport)
    if transport == "tcp":
        span.set_attribute("network.protocol.name", "http")
    if (sid := session_id(ctx)) is not None:
        span.set_attribute("mcp.session.id", sid)


def _is_error(result: dict[str, Any] | CallToolResult) -> bool:
    if isinstance(result, CallToolResult):
        return bool(result.is_error)
    return result.get("isError") is True


def _labels(
    ctx: ServerRequestContext[Any, Any], transport: str, error: str | None, served: set[str]
) -> dict[str, str]:
    """The metric's attributes: the method, the tool, the error kind. Only a tool this
    server offers is named: a name a client made up would be a new series each time."""
    labels = {"mcp.method.name": ctx.method, "network.transport": transport}
    name = (ctx.params or {}).get("name") if ctx.method == "tools/call" else None
    if isinstance(name, str) and name in served:
        labels["gen_ai.tool.name"] = name
    if error is not None:
        labels["error.type"] = error
    return labels


async def approval_wait(platform: Platform, queued: Answer, wait: Awaitable[Answer]) -> Answer:
    """`wait`'s answer, timed as `aat.approval.wait` when `queued` waits for an operator or a
    rule let it through: ended when the operator decided, naming them, the rule and the
    digest of the exact call (the one the audit trail records)."""
    waits = queued.status is Status.pending_approval or queued.allowed_by is not None
    if not telemetry.tracing() or queued.job is None or not waits:
        return await wait
    job_id = queued.job
    with spans.approval_wait({"aat.job.id": job_id}) as span:
        answer = await wait
        attributes, decided_at = await anyio.to_thread.run_sync(
            lambda: decision_of(platform, job_id, answer)
        )
        spans.set_attributes(span, attributes)
        spans.end(span, decided_at)
    return answer


def decision_of(
    platform: Platform, job_id: int, answer: Answer
) -> tuple[dict[str, Any], datetime | None]:
    """The wait span's attributes for job `job_id` answered `answer`, and when it was
    decided. An approver is named only when the decision's signature bears the row out
    (`trust.claims`), as on every page."""
    job = platform.jobs.current(job_id)
    if job is None:
        return {"aat.approval.status": answer.status.value}, None
    status = answer.status
    if claims.claims_approval(job):
        verdict, approver = "approved", claims.approvers(job, platform.seal())
    elif status is Status.pending_approval:
        verdict, approver = "pending", None  # the call stopped waiting; the job did not
    else:
        verdict = status.value
        approver = answer.decided_by if status is Status.denied else None
    attributes = {
        "aat.approval.status": verdict,
        "aat.approval.approver": approver,
        "aat.approval.rule": None if job.allowed_by_rule is None else str(job.allowed_by_rule),
        "aat.args.digest": job.args_digest,
    }
    return attributes, job.decided_at
