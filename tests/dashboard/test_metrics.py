"""`GET /metrics` (SPEC §23): 401 to a scraper without credentials, figures to an admin or the
token's holder, and figures that move as calls are queued and run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from dash_helpers import BASE, add_operator, log_in, queue_send
from fastapi.testclient import TestClient
from pydantic import SecretStr

from dashboard.app import create_app
from webplatform.config import Settings
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store.models import Surface

TOKEN = "scrape-token-5d1e"


@pytest.fixture
def platform_settings(settings: Settings) -> Settings:
    """A dashboard with a metrics token set (AAT_METRICS_TOKEN)."""
    return settings.model_copy(update={"metrics_token": SecretStr(TOKEN)})


@pytest.fixture
def app(platform_settings: Settings, platform: Platform) -> Any:
    return create_app(platform_settings, platform=platform, embed_worker=False, mcp=False)


@pytest.fixture
def client(app: Any) -> Iterator[TestClient]:
    with TestClient(app, base_url=BASE, follow_redirects=False) as c:
        yield c


def value(text: str, name: str, labels: str = "") -> float:
    """One sample's value in Prometheus' text format (0 when absent)."""
    match = re.search(rf"^{re.escape(name + labels)} ([0-9.e+-]+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def scrape(client: TestClient) -> str:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


def test_without_credentials_a_scraper_gets_401_not_the_login_page(client: TestClient) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        response = client.get("/metrics", headers=headers)
        assert response.status_code == 401
        assert "location" not in response.headers
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_an_admin_reads_them_and_an_approver_does_not(
    platform: Platform, client: TestClient
) -> None:
    add_operator(platform, "ada", role="admin")
    add_operator(platform, "abe", role="approver")
    log_in(client, "abe")
    assert client.get("/metrics").status_code == 401
    log_in(client, "ada")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert "aat_approvals_pending" in response.text


def test_pending_approvals_and_jobs_by_outcome_move_with_the_calls(
    platform: Platform, client: TestClient
) -> None:
    before = scrape(client)
    assert value(before, "aat_approvals_pending") == 0
    queue_send(platform)
    request_run(
        platform=platform,
        call=RunCall(kind="tool", name="hello-world", action="greet", args={"name": "x"}),
        actor=Actor(surface=Surface.mcp_http, client="test-agent"),
        consent=Consent.NONE,
    )
    after = scrape(client)
    assert value(after, "aat_approvals_pending") == 1
    succeeded = '{outcome="succeeded"}'
    assert (
        value(after, "aat_jobs_total", succeeded) == value(before, "aat_jobs_total", succeeded) + 1
    )
