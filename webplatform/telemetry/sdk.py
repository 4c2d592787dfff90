"""The OpenTelemetry SDK set up from the standard `OTEL_*` variables; imported only when on.

The exporters read their own variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, `..._HEADERS`,
`..._TIMEOUT`, the per-signal endpoints), the resource reads `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES`, the batch processor `OTEL_BSP_*` and the metric reader
`OTEL_METRIC_EXPORT_INTERVAL`: aat adds no variable of its own. Console exporters write to
stderr, since `aat mcp`'s stdout carries the protocol.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

import webplatform

__all__ = ["start_metrics", "start_tracing"]


def _resource() -> Resource:
    """`OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`, with `aat` as the default name."""
    defaults = {"service.version": webplatform.__version__}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        defaults["service.name"] = "aat"
    # Resource.create lets the attributes given here win over the environment's.
    return Resource.create(defaults)


def _span_exporter(name: str) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter(out=sys.stderr)
    if name != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER: {name!r} is not one aat sends to (otlp, console)")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _metric_exporter(name: str) -> MetricExporter:
    if name == "console":
        return ConsoleMetricExporter(out=sys.stderr)
    if name != "otlp":
        raise ValueError(
            f"OTEL_METRICS_EXPORTER: {name!r} is not one aat sends to (otlp, console; "
            "Prometheus scrapes `aat serve`'s /metrics)"
        )
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter()


def start_tracing(names: Sequence[str]) -> None:
    """The global tracer provider, batching spans to each named exporter; flushed at exit."""
    provider = TracerProvider(resource=_resource())
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_span_exporter(name)))
    trace.set_tracer_provider(provider)


def start_metrics(names: Sequence[str]) -> None:
    """The global meter provider, exporting every `OTEL_METRIC_EXPORT_INTERVAL` ms."""
    readers = [PeriodicExportingMetricReader(_metric_exporter(name)) for name in names]
    metrics.set_meter_provider(MeterProvider(resource=_resource(), metric_readers=readers))
