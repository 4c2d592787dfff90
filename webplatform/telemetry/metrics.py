"""aat's metrics, recorded in this process for Prometheus (`aat serve`'s /metrics) and OTLP.

Each recording function hands its figure to the sinks this process has: OTLP when the `OTEL_*`
variables ask for metrics (`webplatform.telemetry.start`), Prometheus once `aat serve`'s
dashboard asks for its registry (`prometheus()`). With neither, every function returns at
once. Labels are method, tool and rule names, states and error kinds: never an argument.

What is recorded here is what this process did (its MCP requests, the decisions it took,
the rules it matched, the jobs it moved), so several processes' figures add up honestly;
what the database knows for all of them (approvals pending, jobs by state) is read from it
when Prometheus scrapes (`dashboard.routes.metrics`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "DURATION_BUCKETS",
    "approval_decided",
    "job_finished",
    "observe_pending",
    "operation",
    "prometheus",
    "recording",
    "rule_hit",
    "start_otlp",
]

# The MCP semantic conventions' advice for `mcp.server.operation.duration`, in seconds; the
# approval wait uses the same scale, beyond the longest a call is held.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
WAIT_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600)


class _Sink(Protocol):
    def operation(self, attributes: dict[str, str], seconds: float) -> None: ...
    def approval(self, status: str, seconds: float) -> None: ...
    def rule(self, effect: str, rule: str) -> None: ...
    def job(self, outcome: str) -> None: ...


_sinks: list[_Sink] = []
_lock = threading.Lock()
_prometheus: list[Any] = []


def recording() -> bool:
    """Whether this process records metrics at all."""
    return bool(_sinks)


def operation(attributes: dict[str, str], seconds: float) -> None:
    """One MCP request served: `mcp.method.name`, `gen_ai.tool.name`, `error.type`..."""
    for sink in _sinks:
        sink.operation(attributes, seconds)


def approval_decided(status: str, seconds: float) -> None:
    """An operator decided a queued call (`approved`, `denied`) `seconds` after it was asked."""
    for sink in _sinks:
        sink.approval(status, seconds)


def rule_hit(effect: str, rule: str) -> None:
    """A rule decided a call in advance (`allow`, `deny`, `ask`)."""
    for sink in _sinks:
        sink.rule(effect, rule)


def job_finished(outcome: str) -> None:
    """A job ended in `outcome` (its final state), moved there by this process."""
    for sink in _sinks:
        sink.job(outcome)


class _Otlp:
    """The instruments on the global meter provider (`telemetry.sdk.start_metrics`)."""

    def __init__(self) -> None:
        from opentelemetry import metrics

        meter = metrics.get_meter("aat")
        self._operation = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request duration as observed by the server",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self._approval = meter.create_histogram(
            "aat.approval.wait.duration",
            unit="s",
            description="Time from a call's request to an operator's decision",
            explicit_bucket_boundaries_advisory=list(WAIT_BUCKETS),
        )
        self._rules = meter.create_counter("aat.rule.hits", description="Calls a rule decided")
        self._jobs = meter.create_counter("aat.jobs.finished", description="Jobs by outcome")

    def operation(self, attributes: dict[str, str], seconds: float) -> None:
        self._operation.record(seconds, attributes)

    def approval(self, status: str, seconds: float) -> None:
        self._approval.record(seconds, {"aat.approval.status": status})

    def rule(self, effect: str, rule: str) -> None:
        self._rules.add(1, {"aat.rule.effect": effect, "aat.rule.id": rule})

    def job(self, outcome: str) -> None:
        self._jobs.add(1, {"aat.job.outcome": outcome})

    def pending(self, read: Callable[[], int]) -> None:
        from opentelemetry import metrics
        from opentelemetry.metrics import CallbackOptions, Observation

        def observe(_options: CallbackOptions) -> list[Observation]:
            return [Observation(read())]

        metrics.get_meter("aat").create_observable_gauge(
            "aat.approvals.pending",
            callbacks=[observe],
            description="Calls waiting for an operator's decision, as the database holds them",
        )


class _Prometheus:
    """The same figures as Prometheus instruments, in a registry of their own."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        self._operation = Histogram(
            "mcp_server_operation_duration_seconds",
            "MCP request duration as observed by this server",
            ["mcp_method_name", "gen_ai_tool_name", "error_type"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self._approval = Histogram(
            "aat_approval_wait_seconds",
            "Time from a call's request to an operator's decision, decided by this process",
            ["status"],
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self._rules = Counter(
            "aat_rule_hits", "Calls a rule decided in this process", ["effect", "rule"],
            registry=self.registry,
        )  # fmt: skip

    def operation(self, attributes: dict[str, str], seconds: float) -> None:
        self._operation.labels(
            attributes.get("mcp.method.name", ""),
            attributes.get("gen_ai.tool.name", ""),
            attributes.get("error.type", ""),
        ).observe(seconds)

    def approval(self, status: str, seconds: float) -> None:
        self._approval.labels(status).observe(seconds)

    def rule(self, effect: str, rule: str) -> None:
        self._rules.labels(effect, rule).inc()

    def job(self, outcome: str) -> None:
        del outcome  # /metrics counts jobs by outcome from the database, for every process


def observe_pending(read: Callable[[], int]) -> None:
    """Report through OTLP, at each export, the approvals pending as `read()` finds them in
    the database: only `aat serve` asks, so one process reports what all of them share."""
    for sink in _sinks:
        if isinstance(sink, _Otlp):
            sink.pending(read)


def start_otlp() -> None:
    """Record into the global meter provider from now on (once)."""
    with _lock:
        if not any(isinstance(s, _Otlp) for s in _sinks):
            _sinks.append(_Otlp())


def prometheus() -> Any:
    """This process's Prometheus registry (a `prometheus_client.CollectorRegistry`), made
    and recorded into from the first call on."""
    with _lock:
        if not _prometheus:
            sink = _Prometheus()
            _prometheus.append(sink.registry)
            _sinks.append(sink)
        return _prometheus[0]
