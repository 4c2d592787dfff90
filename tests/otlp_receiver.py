"""A local OTLP/HTTP receiver for tests: what aat sends, decoded with `opentelemetry-proto`.

`receiver()` serves `POST /v1/traces` and `POST /v1/metrics` (protobuf, as the OTLP/HTTP
exporter sends them) on a free loopback port and keeps every span and metric data point it
was sent; `otel_env(url)` is the environment that points an `aat` process at it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class Span:
    """One span as received: ids in hex, attributes as plain values."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    status_code: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    service: str


@dataclass
class Received:
    """Everything the receiver was sent so far; `raw` keeps each request body decoded as text
    for checks that nothing secret was sent anywhere in it."""

    spans: list[Span] = field(default_factory=list)
    metrics: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, ready: Callable[[list[Span]], bool], timeout_s: float = 30) -> list[Span]:
        """The spans once `ready(spans)` holds; fails with what arrived after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                spans = list(self.spans)
            if ready(spans):
                return spans
            time.sleep(0.05)
        names = sorted({s.name for s in spans})
        raise AssertionError(f"spans not as expected after {timeout_s} s; got {names}")

    def named(self, name: str) -> list[Span]:
        """The spans called `name` received so far."""
        with self.lock:
            return [s for s in self.spans if s.name == name]


def _value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _spans(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    out = []
    for resource_spans in request.resource_spans:
        service = _attributes(resource_spans.resource.attributes).get("service.name", "")
        for scope in resource_spans.scope_spans:
            for s in scope.spans:
                out.append(
                    Span(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        kind=s.kind,
                        status_code=s.status.code,
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attributes=_attributes(s.attributes),
                        service=service,
                    )
                )
    return out


def _metrics(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    request = ExportMetricsServiceRequest()
    request.ParseFromString(body)
    out = []
    for resource_metrics in request.resource_metrics:
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                data = getattr(metric, metric.WhichOneof("data"))
                for point in data.data_points:
                    out.append((metric.name, _attributes(point.attributes)))
    return out


@contextmanager
def receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP receiver on a free loopback port: its base URL and what it received."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with received.lock:
                received.raw.append(body)
                if self.path == "/v1/traces":
                    received.spans.extend(_spans(body))
                elif self.path == "/v1/metrics":
                    received.metrics.extend(_metrics(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def otel_env(url: str) -> dict[str, str]:
    """The standard variables that send an `aat` process's traces and metrics to `url`,
    batched briefly so a test sees them within a second."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": url,
        "OTEL_SERVICE_NAME": "aat-under-test",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }
