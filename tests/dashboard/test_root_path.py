"""Behind a proxy that strips `/aat`: every local URL a page or redirect hands out keeps it.

The test client plays the proxy: it sends the app the path without the prefix, and follows
a URL only after checking that it starts with the prefix and taking the prefix off.
"""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from dash_helpers import BASE, ORIGIN, add_operator, queue_send
from fastapi.testclient import TestClient
from pydantic import ValidationError
from starlette.requests import Request
from starlette.routing import NoMatchFound

from dashboard import urls
from dashboard.app import create_app
from dashboard.setup import open_setup, setup_base_url
from webplatform.config import Settings
from webplatform.platform import Platform

URL_ATTRS = frozenset(
    {"href", "src", "action", "hx-get", "hx-post", "hx-put", "hx-patch", "hx-delete"}
    | {"hx-push-url", "hx-replace-url"}
)
FOLLOW_ATTRS = frozenset({"href", "src", "hx-get"})


class Links(HTMLParser):
    """Every URL-valued attribute of a page: (attribute, value)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in URL_ATTRS and value and value not in ("true", "false"):
                self.found.append((name, value))


def _local(url: str) -> bool:
    parts = urlsplit(url)
    return not parts.scheme and not parts.netloc and not url.startswith("#")


class Proxy:
    """A client behind a prefix-stripping proxy, checking every URL it is handed."""

    def __init__(self, client: TestClient, root: str) -> None:
        self.client = client
        self.root = root
        self.checked: set[str] = set()

    def inside(self, url: str, where: str) -> str:
        """The app path of a local URL, after asserting it carries the prefix."""
        assert url.startswith(self.root + "/"), f"{url!r} in {where} escapes {self.root}/"
        return url[len(self.root) :]

    def links(self, html: str, where: str) -> list[tuple[str, str]]:
        parser = Links()
        parser.feed(html)
        local = [(a, v) for a, v in parser.found if _local(v)]
        for _attr, value in local:
            self.inside(value, where)
        self.checked.update(v for _a, v in local)
        return local

    def redirect(self, response, where: str) -> str:
        assert response.status_code in (302, 303, 307), (where, response.status_code)
        return self.inside(response.headers["location"], f"redirect of {where}")

    def get(self, path: str, **kw) -> str:
        r = self.client.get(path, **kw)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        self.links(r.text, path)
        return r.text

    def post(self, url: str, data: dict[str, str], **headers: str):
        return self.client.post(
            self.inside(url, "a form"), data=data, headers={**ORIGIN, **headers}
        )

    def crawl(self, start: list[str], limit: int = 400) -> set[str]:
        """GET every page reachable by links and hx-get from `start`; returns their paths."""
        seen, todo = set(start), list(start)
        while todo:
            path = todo.pop()
            r = self.client.get(path)
            assert r.status_code == 200, (path, r.status_code, r.text[:300])
            if "html" not in r.headers.get("content-type", ""):
                continue
            for attr, value in self.links(r.text, path):
                target = self.inside(value, path).split("#")[0]
                if attr in FOLLOW_ATTRS and target not in seen:
                    seen.add(target)
                    todo.append(target)
            assert len(seen) < limit, "the crawl found far more pages than the dashboard has"
        return seen


def _form(html: str, action_ends: str) -> tuple[str, dict[str, str]]:
    """The action URL and hidden fields of the first form whose action ends so."""

    class Form(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.action: str | None = None
            self.fields: dict[str, str] = {}
            self.inside = False

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = {k: v or "" for k, v in attrs}
            if tag == "form" and self.action is None and a.get("action", "").endswith(action_ends):
                self.action, self.inside = a["action"], True
            elif tag == "input" and self.inside and a.get("type") == "hidden":
                self.fields[a["name"]] = a.get("value", "")

        def handle_endtag(self, tag: str) -> None:
            if tag == "form":
                self.inside = False

    parser = Form()
    parser.feed(html)
    assert parser.action, f"no form posting to ...{action_ends}"
    return parser.action, parser.fields


@pytest.fixture(params=["/aat", ""], ids=["root-path", "no-root-path"])
def proxy(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Proxy]:
    settings = Settings(home=tmp_path / "aat-home", root_path=request.param)
    platform = Platform(settings)
    app = create_app(settings, platform=platform, embed_worker=False, mcp=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        yield Proxy(client, request.param)
    platform.engine.dispose()


def test_every_page_and_redirect_stays_under_the_root_path(proxy: Proxy) -> None:
    c, root = proxy.client, proxy.root
    platform: Platform = c.app.state.platform  # type: ignore[attr-defined]

    # First-run setup: its page and the redirect after it.
    token = open_setup(platform)
    assert token is not None
    setup_page = proxy.get(f"/setup?token={token}")
    action, fields = _form(setup_page, "/setup")
    done = proxy.post(
        action,
        {**fields, "username": "alice", "password": "pw-alice-1", "password2": "pw-alice-1"},
    )
    assert proxy.redirect(done, "setup") == "/"
    c.cookies.clear()

    # Logged out: the guard's redirect and htmx's HX-Redirect both keep the prefix.
    sent_away = c.get("/approvals?x=1")
    assert proxy.redirect(sent_away, "the guard") == "/login?next=%2Fapprovals%3Fx%3D1"
    hx = c.get("/approvals", headers={"HX-Request": "true"})
    assert hx.status_code == 401 and proxy.inside(hx.headers["hx-redirect"], "HX-Redirect")
    login_page = proxy.get("/login?next=/jobs")
    action, fields = _form(login_page, "/login")
    logged_in = proxy.post(action, {**fields, "username": "alice", "password": "pw-alice-1"})
    assert proxy.redirect(logged_in, "login") == "/jobs"

    # Something in every list: a pending call and a finished run.
    pending = queue_send(platform).job
    run_form = proxy.get("/run/tool/hello-world/greet")
    action, fields = _form(run_form, "/run/tool/hello-world/greet")
    ran = proxy.post(action, {**fields, "arg:name": "Zoë"})
    job_path = proxy.redirect(ran, "a run")
    assert job_path.startswith("/jobs/")

    pages = proxy.crawl(["/", "/registry?q=send", "/login", "/jobs?state=succeeded"])
    for must in (
        "/",
        "/approvals",
        "/jobs",
        job_path,
        f"/jobs/{pending}",
        "/registry",
        "/registry/tool/outbox",
        "/run/tool/outbox/send-message",
        "/skills",
        "/skills/approvals",
    ):
        assert must in pages, f"{must} not reachable by links from the overview"
    assert (
        f"{root}/static/htmx.min.js" in proxy.checked and f"{root}/static/app.css" in proxy.checked
    )

    # htmx fragments, the confirm step, a 404 page, and each decision's redirect.
    proxy.get("/registry?q=send", headers={"HX-Request": "true"})
    proxy.get("/jobs?tool=outbox", headers={"HX-Request": "true"})
    proxy.get("/approvals", headers={"HX-Request": "true"})
    missing = c.get("/skills/no-such-skill")
    assert missing.status_code == 404 and proxy.links(missing.text, "a 404 page")
    page = proxy.get("/run/tool/outbox/send-message")
    action, fields = _form(page, "/run/tool/outbox/send-message")
    confirm = proxy.post(
        action, {**fields, "arg:to": "b@example.org", "arg:subject": "s", "arg:body": "b"}
    )
    assert confirm.status_code == 200 and "Confirm and run" in confirm.text
    proxy.links(confirm.text, "the confirm page")
    card = proxy.get(f"/jobs/{pending}")
    action, fields = _form(card, f"/jobs/{pending}/approve")
    approved = proxy.post(action, {**fields, "password": "pw-alice-1"})
    assert proxy.redirect(approved, "approve") == f"/jobs/{pending}?done=approved"
    action, fields = _form(proxy.get(job_path), "/rerun")
    assert proxy.redirect(proxy.post(action, fields), "re-run").startswith("/jobs/")
    action, fields = _form(proxy.get("/"), "/logout")
    assert proxy.redirect(proxy.post(action, fields), "logout") == "/login"


def test_mcp_job_links_stay_under_the_dashboard_url(tmp_path: Path) -> None:
    """The links in MCP answers are built from AAT_DASHBOARD_URL, the proxy's address."""
    settings = Settings(
        home=tmp_path / "home", root_path="/aat", dashboard_url="https://example.org/aat/"
    )
    platform = Platform(settings)
    add_operator(platform, "alice")
    answer = queue_send(platform)
    assert answer.approval_url == f"https://example.org/aat/jobs/{answer.job}"
    platform.engine.dispose()


def test_the_setup_link_names_the_proxys_address_under_a_root_path() -> None:
    """Only the proxy's address has the prefix; the served address would lose it."""
    behind = Settings(root_path="/aat", dashboard_url="https://example.org/aat")
    assert setup_base_url(behind, "127.0.0.1", 8000) == "https://example.org/aat"
    # Loopback is printed as localhost, the name passkeys work on (SPEC §25).
    assert setup_base_url(Settings(), "127.0.0.1", 8000) == "http://localhost:8000"


@pytest.mark.parametrize("bad", ["aat", "/a//b", "/aat?x=1"])
def test_a_root_path_that_is_not_a_path_is_refused_in_one_line(bad: str) -> None:
    with pytest.raises(ValidationError, match="AAT_ROOT_PATH must be a path like /aat"):
        Settings(root_path=bad)
    assert Settings(root_path="/aat/").root_path == "/aat"


@pytest.mark.parametrize("root", ["", "/aat"])
def test_each_named_route_links_as_starlette_would(app: Any, root: str) -> None:
    """`urls.url_for` (an index by name) gives exactly `request.url_for(...).path`, for
    every named route of the app, under a root path or none."""
    router = app.router
    scope = {"type": "http", "method": "GET", "path": f"{root}/", "root_path": root,
             "headers": [(b"host", b"127.0.0.1:8000")], "query_string": b"",
             "scheme": "http", "server": ("127.0.0.1", 8000), "router": router}  # fmt: skip
    request = Request(scope)
    named = [r for r in router.routes if isinstance(getattr(r, "name", None), str)]
    assert len(named) > 30
    for route in named:
        params = dict.fromkeys(getattr(route, "param_convertors", {}), "7")
        if route.name == "static":
            params = {"path": "app.css"}
        try:
            expected = request.url_for(route.name, **params).path
        except NoMatchFound:
            continue  # a name Starlette itself cannot build with these parameters
        assert urls.url_for(request, route.name, **params) == expected, route.name
    assert urls.url_for(request, "job_page", job_id=3) == f"{root}/jobs/3"
    with pytest.raises(NoMatchFound):
        urls.url_for(request, "no_such_route")
