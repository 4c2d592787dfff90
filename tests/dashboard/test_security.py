"""Who may approve: Host allow-list, same-origin POSTs, sessions, CSRF, framing, body size,
and no GET that changes anything."""

from __future__ import annotations

import re

from dash_helpers import BASE, ORIGIN, PASSWORD, csrf, queue_send
from fastapi.testclient import TestClient

from dashboard.app import create_app
from webplatform.jobs import states as jobs
from webplatform.store.engine import session_scope
from webplatform.store.models import JobState


def _state(platform, job_id):
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job.state


def test_foreign_host_is_refused(client):
    for host in ["evil.example", "evil.example:8000", "127.0.0.1:9999", "attacker.localhost:8000"]:
        r = client.get("/healthz", headers={"Host": host})
        assert r.status_code == 400, host
    for host in ["127.0.0.1:8000", "localhost:8000", "[::1]:8000"]:
        assert client.get("/healthz", headers={"Host": host}).status_code == 200, host


def test_extra_allowed_hosts(settings, platform):
    settings.allowed_hosts = "aat.example.org:8443"
    app = create_app(settings, platform=platform, embed_worker=False, mcp=False)
    with TestClient(app, base_url=BASE) as c:
        assert c.get("/healthz", headers={"Host": "aat.example.org:8443"}).status_code == 200
        assert c.get("/healthz", headers={"Host": "aat.example.org"}).status_code == 400


def test_foreign_host_cannot_approve_even_with_a_session(platform, alice):
    job = queue_send(platform).job
    token = csrf(alice)
    digest = _digest(platform, job)
    r = alice.post(
        f"/jobs/{job}/approve",
        data={"csrf_token": token, "password": PASSWORD, "digest": digest},
        headers={"Host": "evil.example:8000", "Origin": "http://evil.example:8000"},
    )
    assert r.status_code == 400
    assert _state(platform, job) is JobState.pending_approval


def _digest(platform, job_id):
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job.args_digest


def test_cross_origin_post_is_refused(platform, alice):
    job = queue_send(platform).job
    form = {"csrf_token": csrf(alice), "password": PASSWORD, "digest": _digest(platform, job)}
    for headers in [
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1:9999"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": BASE},
    ]:
        r = alice.post(f"/jobs/{job}/approve", data=form, headers=headers)
        assert r.status_code == 403, headers
        assert "cross-origin" in r.text
    assert _state(platform, job) is JobState.pending_approval


def test_post_without_a_session_is_refused(platform, client):
    job = queue_send(platform).job
    r = client.post(
        f"/jobs/{job}/approve",
        data={"password": PASSWORD, "digest": _digest(platform, job)},
        headers=ORIGIN,
    )
    assert r.status_code == 403 and "log in" in r.text
    assert _state(platform, job) is JobState.pending_approval


def test_post_without_the_csrf_token_is_refused(platform, alice):
    job = queue_send(platform).job
    digest = _digest(platform, job)
    for form in [
        {"password": PASSWORD, "digest": digest},
        {"password": PASSWORD, "digest": digest, "csrf_token": "0" * 64},
    ]:
        r = alice.post(f"/jobs/{job}/approve", data=form, headers=ORIGIN)
        assert r.status_code == 403 and "CSRF" in r.text
    assert _state(platform, job) is JobState.pending_approval


def test_csrf_token_is_the_same_in_every_tab(alice):
    assert csrf(alice, "/") == csrf(alice, "/approvals") == csrf(alice, "/jobs")


def test_no_get_changes_state(platform, alice):
    job = queue_send(platform).job
    for path in [
        f"/jobs/{job}/approve",
        f"/jobs/{job}/deny",
        f"/jobs/{job}/rerun",
        f"/jobs/{job}/approve?digest=x",
        "/logout",
    ]:
        assert alice.get(path).status_code in (404, 405), path
    for path in [
        "/",
        "/approvals",
        f"/jobs/{job}",
        "/jobs",
        "/registry",
        "/run/tool/outbox/send-message",
        "/jobs.csv",
    ]:
        alice.get(path)
    assert _state(platform, job) is JobState.pending_approval
    assert alice.get("/approvals").status_code == 200  # still logged in after GET /logout


def test_pages_forbid_framing_and_inline_script(platform, alice, client):
    job = queue_send(platform).job
    for path in ["/approvals", f"/jobs/{job}", "/", "/login", "/registry/tool/outbox"]:
        r = alice.get(path)
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "same-origin"
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", r.text), path
        assert not re.search(r"\son[a-z]+=", r.text), path
        assert "style=" not in r.text, path


def test_oversized_body_is_413(platform, alice):
    job = queue_send(platform).job
    r = alice.post(
        f"/jobs/{job}/deny",
        data={"csrf_token": csrf(alice), "reason": "x" * 300_000},
        headers=ORIGIN,
    )
    assert r.status_code == 413
    assert _state(platform, job) is JobState.pending_approval


def test_everything_shown_is_escaped(platform, alice):
    job = queue_send(platform, subject="<script>alert(1)</script>", body="<img src=x>").job
    for path in ["/approvals", f"/jobs/{job}"]:
        html = alice.get(path).text
        assert "<script>alert(1)</script>" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "<img src=x>" not in html


def test_healthz_needs_no_login_but_still_checks_host(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/healthz", headers={"Host": "evil.example"}).status_code == 400


def test_mcp_endpoint_skips_the_session_but_not_the_host_check(settings, platform):
    app = create_app(settings, platform=platform, embed_worker=False, mcp=True)
    with TestClient(app, base_url=BASE, follow_redirects=False) as c:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        foreign = c.post("/mcp", json=ping, headers={"Host": "evil.example"})
        assert foreign.status_code == 400
        own = c.post("/mcp", json=ping, headers={"Accept": "application/json, text/event-stream"})
        assert own.status_code != 303 and "log in" not in own.text
