"""OpenTelemetry for aat's long-running processes: traces and metrics, off unless asked.

Configured only by the standard `OTEL_*` variables (SPEC §23). With none of them set, nothing
of the OpenTelemetry SDK is imported (it costs tens of milliseconds to load) and every hook
here is one test of a flag: tracing off costs nothing measurable.

- `start()`: called once by `aat serve`, `aat mcp` (in process) and `aat worker`; sets up
  what the environment asks for (`webplatform.telemetry.sdk`). `aat mcp --url` never calls it.
- `tracing()`: whether this process makes spans.
- `current_ids()`: the active span's trace and span ids, which audit events record.
- `spans`: aat's own spans (the approval wait, the tool's run); `metrics`: its instruments.

Spans and metrics carry names, ids, states and digests only: never an argument's value, a
secret or a tool's output.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

__all__ = ["current_ids", "exporters", "metrics_exported", "start", "tracing"]

log = logging.getLogger(__name__)

_on = {"traces": False, "metrics": False}


def exporters(signal: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """The exporters `OTEL_{SIGNAL}_EXPORTER` names for `signal` (`traces` or `metrics`), or
    `otlp` when only an OTLP endpoint is set; none (off) by default and when the SDK is
    disabled (`OTEL_SDK_DISABLED=true`)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = env.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip().lower()
    if named:
        return [n.strip() for n in named.split(",") if n.strip() and n.strip() != "none"]
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    return ["otlp"] if any(env.get(name, "").strip() for name in endpoints) else []


def start() -> None:
    """Send traces and metrics where the `OTEL_*` variables say, if they say anywhere."""
    traces, metrics = exporters("traces"), exporters("metrics")
    if not traces and not metrics:
        return  # the SDK stays unimported
    from webplatform.telemetry import sdk

    try:
        if traces and not _on["traces"]:
            sdk.start_tracing(traces)
            _on["traces"] = True
        if metrics and not _on["metrics"]:
            sdk.start_metrics(metrics)
            _on["metrics"] = True
            from webplatform.telemetry import metrics as instruments

            instruments.start_otlp()
    except ValueError as exc:  # an exporter aat does not send to: said once, the rest runs
        log.warning("%s; nothing more is sent", exc)


def tracing() -> bool:
    """Whether this process makes and sends spans."""
    return _on["traces"]


def metrics_exported() -> bool:
    """Whether this process sends metrics through OTLP."""
    return _on["metrics"]


def current_ids() -> tuple[str, str] | None:
    """The active span's (trace id, span id) in hex, or None (no span, or tracing off)."""
    if not _on["traces"]:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id)
