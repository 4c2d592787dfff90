"""`GET /metrics` for Prometheus (SPEC §23): an admin's session or `AAT_METRICS_TOKEN`.

A scraper cannot follow a login page, so anyone else gets 401, never a redirect. The figures
the database holds for every process (approvals pending, jobs by state) are read from it on
each scrape; the rest is what this process recorded (`webplatform.telemetry.metrics`).
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily

from dashboard.deps import PlatformDep, permitted
from webplatform.platform import Platform
from webplatform.store.models import TERMINAL_STATES, JobState
from webplatform.telemetry import metrics
from webplatform.trust.permissions import Permission

router = APIRouter()

_OUTCOMES = frozenset(state.value for state in TERMINAL_STATES)


@router.get("/metrics")
def read_metrics(request: Request, platform: PlatformDep) -> Response:
    """The metrics in Prometheus' text format, to an admin or a holder of the token."""
    if not _may_read(request, platform):
        return Response(
            "401: /metrics needs an admin's session or `Authorization: Bearer "
            "$AAT_METRICS_TOKEN`\n",
            status_code=401,
            media_type="text/plain",
            headers={"WWW-Authenticate": 'Bearer realm="aat metrics"'},
        )
    states = platform.jobs.by_state()
    body = generate_latest(metrics.prometheus()) + generate_latest(_from_database(states))
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def _may_read(request: Request, platform: Platform) -> bool:
    """An admin's session, or the metrics token (compared in constant time)."""
    token = platform.settings.metrics_token.get_secret_value()
    sent = request.headers.get("authorization", "")
    if token and hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
        return True
    signed_in = bool(getattr(request.state, "operator", None))
    return signed_in and permitted(request, Permission.read_metrics)


def _from_database(states: dict[str, int]) -> CollectorRegistry:
    """Approvals pending and jobs by outcome, as the database holds them now."""
    pending = GaugeMetricFamily("aat_approvals_pending", "Calls waiting for an operator's decision")
    pending.add_metric([], states.get(JobState.pending_approval.value, 0))
    finished = CounterMetricFamily(
        "aat_jobs", "Jobs that ended, by outcome (as many as retention keeps)", labels=["outcome"]
    )
    for outcome in sorted(_OUTCOMES):
        finished.add_metric([outcome], states.get(outcome, 0))

    class Snapshot:
        def collect(self) -> list[GaugeMetricFamily | CounterMetricFamily]:
            return [pending, finished]

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Snapshot())
    return registry
