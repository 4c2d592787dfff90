"""The Agents page: mint (shown once), list with last use, revoke; requesters on the cards."""

from __future__ import annotations

import csv
import io
import re

from dash_helpers import ORIGIN, PASSWORD, csrf
from fastapi.testclient import TestClient

from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store import agents
from webplatform.store.engine import session_scope
from webplatform.store.models import Surface
from webplatform.trust.authority import seal_for


def _mint(client: TestClient, name: str, password: str = PASSWORD) -> tuple[int, str]:
    form = {"csrf_token": csrf(client, "/agents"), "name": name, "password": password}
    r = client.post("/agents", data=form, headers=ORIGIN)
    return r.status_code, r.text


def test_mint_shows_the_token_once_and_keeps_only_its_hash(
    platform: Platform, alice: TestClient
) -> None:
    assert "No agent tokens" in alice.get("/agents").text
    status, html = _mint(alice, "build-bot")
    assert status == 200
    token = re.search(r'<code id="minted-token">([^<]+)</code>', html)
    assert token and token.group(1).startswith("aat_")
    with session_scope(platform.engine, write=False) as session:
        found = agents.find_agent(session=session, token=token.group(1), seal=seal_for(platform))
    assert found is not None and found.owner == "alice"
    again = alice.get("/agents")
    assert token.group(1) not in again.text and "build-bot" in again.text
    assert again.headers["Cache-Control"] == "no-store"
    row = re.search(r'<tr data-agent="build-bot">.*?</tr>', again.text, re.S)
    assert row and "never" in row.group(0) and "alice" in row.group(0)
    assert "minted token" in row.group(0)


def test_bad_names_and_revocation(platform: Platform, alice: TestClient) -> None:
    assert _mint(alice, "build-bot")[0] == 200
    status, html = _mint(alice, "build-bot")
    assert status == 422 and "already exists" in html
    assert _mint(alice, "no spaces")[0] == 422
    form = {"csrf_token": csrf(alice, "/agents")}
    revoked = alice.post("/agents/build-bot/revoke", data=form, headers=ORIGIN)
    assert revoked.status_code == 200 and "Revoked agent build-bot." in revoked.text
    assert alice.post("/agents/build-bot/revoke", data=form, headers=ORIGIN).status_code == 409
    with session_scope(platform.engine, write=False) as session:
        assert agents.list_agents(session=session, seal=seal_for(platform))[0].revoked_at


def test_agents_page_needs_a_login(client: TestClient) -> None:
    assert client.get("/agents").status_code in (303, 401, 403)
    refused = client.post("/agents", data={"name": "x"}, headers=ORIGIN)
    assert refused.status_code in (303, 401, 403)


def test_cards_and_history_name_the_token_and_mark_the_client_self_reported(
    platform: Platform, alice: TestClient
) -> None:
    answer = request_run(
        platform=platform,
        call=RunCall(
            kind="tool",
            name="outbox",
            action="send-message",
            args={"to": "bob@example.org", "subject": "hi", "body": "hello"},
        ),
        actor=Actor(surface=Surface.mcp_http, client="claude-code", agent="build-bot"),
        consent=Consent.QUEUE,
    )
    for page in ("/approvals", f"/jobs/{answer.job}", "/jobs"):
        html = alice.get(page).text
        assert "build-bot" in html, page
        assert "client “claude-code” (self-reported)" in html, page
    header, row = list(csv.reader(io.StringIO(alice.get("/jobs.csv").text)))[:2]
    record = dict(zip(header, row, strict=True))
    assert record["requested_by"] == "build-bot" and record["client"] == "claude-code"
