"""While AAT_UNCONFINED is set, every page shows a red banner saying what tools may run without:
Landlock (`1`) or namespaces of their own (`namespaces`)."""

from __future__ import annotations

import pytest
from dash_helpers import BASE
from fastapi.testclient import TestClient

from dashboard.app import create_app
from webplatform.config import Settings
from webplatform.platform import Platform

BANNERS = {
    "1": "AAT_UNCONFINED=1 is set: where Landlock is missing, tools run unconfined",
    "namespaces": "AAT_UNCONFINED=namespaces is set: where namespaces are missing, tools run "
    "with Landlock alone",
}


def test_no_banner_when_tools_are_confined(client: TestClient) -> None:
    page = client.get("/login").text
    assert "banner-unconfined" not in page and "AAT_UNCONFINED" not in page


@pytest.mark.parametrize("value", ["1", "namespaces"])
def test_red_banner_while_unconfined_is_set(
    settings: Settings, platform: Platform, value: str
) -> None:
    loose = Settings(**{**settings.model_dump(), "unconfined": value})
    app = create_app(loose, platform=platform, embed_worker=False, mcp=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        page = client.get("/login").text
    assert BANNERS[value] in page and 'class="banner-unconfined" role="alert"' in page
    others = [banner for key, banner in BANNERS.items() if key != value]
    assert not any(banner in page for banner in others)
