"""A real dashboard app on a real SQLite file per test, driven over HTTP by TestClient."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dash_helpers import BASE, add_operator, log_in
from fastapi.testclient import TestClient

from dashboard.app import create_app
from webplatform.config import Settings
from webplatform.platform import Platform


@pytest.fixture
def app(settings: Settings, platform: Platform) -> Any:
    """The dashboard app; no embedded worker, so approved jobs stay put for inspection."""
    return create_app(settings, platform=platform, embed_worker=False, mcp=False)


@pytest.fixture
def client(app: Any) -> Iterator[TestClient]:
    """An anonymous browser on 127.0.0.1:8000."""
    with TestClient(app, base_url=BASE, follow_redirects=False) as c:
        yield c


@pytest.fixture
def alice(platform: Platform, client: TestClient) -> TestClient:
    """`client`, logged in as operator alice."""
    add_operator(platform, "alice")
    log_in(client, "alice")
    return client


@pytest.fixture
def client_as(app: Any) -> Iterator[Callable[[str], TestClient]]:
    """`client_as(name)`: a TestClient logged in as operator `name`, on the same app."""
    opened: list[TestClient] = []

    def open_as(name: str) -> TestClient:
        client = TestClient(app, base_url=BASE, follow_redirects=False)
        client.__enter__()
        opened.append(client)
        log_in(client, name)
        return client

    yield open_as
    for client in opened:
        client.__exit__(None, None, None)
