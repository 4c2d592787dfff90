"""Login, sessions that survive a restart, the rate limit, first-run setup, logout."""

from __future__ import annotations

import io

import pytest
from dash_helpers import BASE, ORIGIN, PASSWORD, add_operator, csrf
from fastapi.testclient import TestClient

from dashboard.app import create_app
from dashboard.setup import print_setup_link
from webplatform.platform import Platform
from webplatform.store import operators
from webplatform.store.engine import session_scope

PAGES = [
    "/",
    "/approvals",
    "/jobs",
    "/jobs/1",
    "/registry",
    "/registry/tool/outbox",
    "/run/tool/hello-world/greet",
    "/skills",
    "/jobs.csv",
    "/jobs.xlsx",
]


def test_every_page_but_health_and_login_needs_a_session(client):
    for path in PAGES:
        r = client.get(path)
        assert r.status_code == 303, path
        assert r.headers["location"].startswith("/login?next=")
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/login").status_code == 200
    r = client.get("/approvals", headers={"HX-Request": "true"})
    assert r.status_code == 401 and r.headers["HX-Redirect"].startswith("/login")


def test_login_sets_a_strict_httponly_cookie_and_returns_to_next(platform, client):
    add_operator(platform, "alice")
    r = client.post(
        "/login",
        data={"username": "alice", "password": PASSWORD, "next": "/approvals"},
        headers=ORIGIN,
    )
    assert r.status_code == 303 and r.headers["location"] == "/approvals"
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert client.get("/approvals").status_code == 200


def test_login_never_redirects_off_site(platform, client):
    add_operator(platform, "alice")
    r = client.post(
        "/login",
        data={"username": "alice", "password": PASSWORD, "next": "https://evil.example/"},
        headers=ORIGIN,
    )
    assert r.headers["location"] == "/"


def test_wrong_password_is_refused_and_rate_limited(platform, client):
    add_operator(platform, "alice")
    for _ in range(5):
        r = client.post(
            "/login", data={"username": "alice", "password": "wrong-password"}, headers=ORIGIN
        )
        assert r.status_code == 401
        assert "wrong user name or password" in r.text
    r = client.post("/login", data={"username": "alice", "password": PASSWORD}, headers=ORIGIN)
    assert r.status_code == 429
    assert "too many failed logins" in r.text
    assert int(r.headers["retry-after"]) > 0


def test_session_survives_a_restart(settings, platform, alice):
    cookie = alice.cookies.get("aat_session")
    again = create_app(settings, platform=platform, embed_worker=False, mcp=False)
    with TestClient(again, base_url=BASE, follow_redirects=False) as fresh:
        fresh.cookies.set("aat_session", cookie)
        assert fresh.get("/approvals").status_code == 200


def test_logout_ends_the_session(alice):
    token = csrf(alice)
    cookie = alice.cookies.get("aat_session")
    r = alice.post("/logout", data={"csrf_token": token}, headers=ORIGIN)
    assert r.status_code == 303
    alice.cookies.set("aat_session", cookie)
    assert alice.get("/approvals").status_code == 303


def test_removed_operator_is_logged_out(platform, alice):
    with session_scope(platform.engine) as session:
        operators.remove_operator(session=session, name="alice")
    assert alice.get("/").status_code == 303


def test_first_run_setup_link_works_once(settings, platform, client):
    out = io.StringIO()
    link = print_setup_link(settings, platform, host="127.0.0.1", port=8000, out=out)
    assert link is not None and link in out.getvalue()
    assert link.startswith("http://localhost:8000/setup?token=")  # where passkeys work
    token = link.split("token=")[1]
    assert client.get("/setup?token=wrong").status_code == 404
    page = client.get(f"/setup?token={token}")
    assert page.status_code == 200 and 'name="password2"' in page.text
    form = {"token": token, "username": "root", "password": PASSWORD, "password2": PASSWORD}
    r = client.post("/setup", data=form, headers=ORIGIN)
    assert r.status_code == 303
    assert client.get("/approvals").status_code == 200
    again = client.post("/setup", data={**form, "username": "mallory"}, headers=ORIGIN)
    assert again.status_code == 400 and "already done" in again.text
    assert print_setup_link(settings, platform, out=io.StringIO()) is None


def test_the_setup_link_stays_dead_after_every_operator_is_removed(settings, platform, client):
    link = print_setup_link(settings, platform, out=io.StringIO())
    assert link is not None
    token = link.split("token=")[1]
    # An operator is added another way (`aat operator add`), then removed again.
    platform.operators.add("alice", PASSWORD)
    with session_scope(platform.engine) as session:
        operators.remove_operator(session=session, name="alice")
    form = {"token": token, "username": "mallory", "password": PASSWORD, "password2": PASSWORD}
    assert client.get(f"/setup?token={token}").status_code == 404
    assert client.post("/setup", data=form, headers=ORIGIN).status_code == 400
    # A restart neither revives the old link nor prints a new one: the CLI adds operators now.
    restarted = Platform(settings)
    out = io.StringIO()
    assert print_setup_link(settings, restarted, out=out) is None
    assert "aat operator add" in out.getvalue()
    app = create_app(settings, platform=restarted, embed_worker=False, mcp=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as again:
        assert again.post("/setup", data=form, headers=ORIGIN).status_code == 400
    with session_scope(restarted.engine) as session:
        assert operators.count_operators(session=session) == 0
    restarted.engine.dispose()


@pytest.mark.parametrize("problem", ["mismatch", "short"])
def test_setup_explains_bad_input(settings, platform, client, problem):
    link = print_setup_link(settings, platform, out=io.StringIO())
    assert link is not None
    token = link.split("token=")[1]
    second = PASSWORD if problem == "short" else PASSWORD + "x"
    first = "short" if problem == "short" else PASSWORD
    r = client.post(
        "/setup",
        data={
            "token": token,
            "username": "root",
            "password": first,
            "password2": second if problem != "short" else first,
        },
        headers=ORIGIN,
    )
    assert r.status_code == 400
    assert ("differ" in r.text) if problem == "mismatch" else ("too short" in r.text)
    assert 'value="root"' in r.text


def test_login_field_names(client):
    html = client.get("/login").text
    assert 'name="username"' in html and 'name="password"' in html
