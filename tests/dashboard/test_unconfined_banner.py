"""While AAT_UNCONFINED=1 is set, every page shows a red banner saying tools may run unconfined."""

from __future__ import annotations

from dash_helpers import BASE
from fastapi.testclient import TestClient

from dashboard.app import create_app
from webplatform.config import Settings
from webplatform.platform import Platform

BANNER = "AAT_UNCONFINED=1 is set"


def test_no_banner_when_tools_are_confined(client: TestClient) -> None:
    assert BANNER not in client.get("/login").text


def test_red_banner_while_unconfined_is_set(settings: Settings, platform: Platform) -> None:
    loose = settings.model_copy(update={"unconfined": True})
    app = create_app(loose, platform=platform, embed_worker=False, mcp=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as browser:
        page = browser.get("/login").text
    assert BANNER in page and 'class="banner-unconfined" role="alert"' in page
