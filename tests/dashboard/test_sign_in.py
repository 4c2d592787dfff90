"""Agents sign in through the browser (SPEC §18): `/mcp` as a protected resource, aat as its
authorization server, and the dashboard page where an operator lets an agent in.

The app is the real dashboard with `/mcp` mounted, on this test's database (SQLite and
PostgreSQL); the OAuth client is the hand-written one in sign_in_helpers, so each test can
break one step. The SDK's own client and Chromium do the whole flow in
tests/browser/test_sign_in_browser.py.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import pytest
from client_documents import REBINDING_HOST, DocumentServer, document_server
from dash_helpers import BASE, PASSWORD, add_operator, csrf, log_in
from fastapi.testclient import TestClient
from mcp.server.auth.handlers import token as token_handler
from sign_in_helpers import (
    INIT,
    MCP_HEADERS,
    REDIRECT,
    RESOURCE,
    answer,
    authorize,
    code_of,
    exchange,
    mcp_status,
    pkce,
    refresh,
    register,
    request_id,
)
from soft_authenticator import SoftAuthenticator
from sqlmodel import select

from dashboard.app import create_app
from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import agents, session_scope
from webplatform.store.agents import add_agent, list_agents, revoke_agent
from webplatform.store.models import OAuthClient, OAuthGrant, OAuthRefreshToken, utcnow
from webplatform.store.oauth import prune_expired
from webplatform.trust.authority import seal_for
from webplatform.trust.oauth_clients import ClientDocumentError, fetch_document


@contextmanager
def site_with(settings: Settings, platform: Platform, **changes: Any) -> Iterator[TestClient]:
    """The dashboard with `/mcp` and the OAuth endpoints, its settings changed by `changes`;
    operator alice (an admin) logged in."""
    if changes:
        settings = settings.model_copy(update=changes)
        platform = Platform(settings, engine=platform.engine)
    app = create_app(settings, platform=platform, embed_worker=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        add_operator(platform, "alice")
        log_in(client, "alice")
        yield client


@pytest.fixture
def site(settings: Settings, platform: Platform) -> Iterator[TestClient]:
    """`site_with` the test's own settings."""
    with site_with(settings, platform) as client:
        yield client


def signed_in(site: TestClient, agent: str = "laptop-agent") -> tuple[Any, dict[str, Any]]:
    """The whole flow by hand; (client information, token response)."""
    info = register(site)
    pair = pkce()
    code = code_of(answer(site, request_id(authorize(site, info["client_id"], pair)), agent=agent))
    tokens = exchange(site, info, code, pair.verifier)
    assert tokens.status_code == 200, tokens.text
    return info, tokens.json()


def refusal_page(response: Any) -> str:
    """The HTML page `/authorize` answers a request it refuses: 400, no redirect anywhere."""
    assert response.status_code == 400, (response.status_code, response.headers)
    assert "location" not in response.headers
    assert response.headers["content-type"].startswith("text/html")
    assert "<h1>Sign-in refused</h1>" in response.text
    return str(response.text)


def agents_named(platform: Platform) -> dict[str, Any]:
    with session_scope(platform.engine) as session:
        return {a.name: a for a in list_agents(session=session, seal=seal_for(platform))}


def test_mcp_is_a_protected_resource_naming_aat_as_its_server(
    site: TestClient, platform: Platform
) -> None:
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        described = site.get(path).json()
        assert described["resource"] == RESOURCE
        assert described["authorization_servers"] == [BASE]
    server = site.get("/.well-known/oauth-authorization-server").json()
    assert server["issuer"] == BASE
    assert server["authorization_endpoint"] == f"{BASE}/authorize"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["client_id_metadata_document_supported"] is True
    assert server["registration_endpoint"] == f"{BASE}/register"
    assert server["authorization_response_iss_parameter_supported"] is True
    with session_scope(platform.engine) as session:
        minted = add_agent(session=session, name="minted", owner="alice", seal=seal_for(platform))[
            1
        ]
    for token in ("", "wrong"):
        refused = site.post(
            "/mcp", json=INIT, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}
        )
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert f'resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert mcp_status(site, minted) == 200  # minted tokens keep working


def test_registered_clients_are_public_and_no_secret_is_kept(
    site: TestClient, platform: Platform
) -> None:
    info = register(site)
    assert info["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in info
    with session_scope(platform.engine) as session:
        stored = session.exec(select(OAuthClient)).one()
    assert "client_secret" not in stored.info


def test_a_signed_in_agent_is_an_agent_token_owned_by_the_operator(
    site: TestClient, platform: Platform
) -> None:
    _info, tokens = signed_in(site, agent="laptop-agent")
    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == 3600
    assert mcp_status(site, tokens["access_token"]) == 200
    agent = agents_named(platform)["laptop-agent"]
    assert agent.owner == "alice"
    assert agent.resource == RESOURCE
    assert agent.expires_at is not None
    assert agent.client == "test client"
    # On the Agents page, marked as signed in with its client, and revocable like any other.
    row = re.search(r'<tr data-agent="laptop-agent">.*?</tr>', site.get("/agents").text, re.S)
    assert row is not None
    assert "signed in with <q>test client</q>" in row.group(0)
    with session_scope(platform.engine) as session:
        assert revoke_agent(session=session, name="laptop-agent", seal=seal_for(platform))
    assert mcp_status(site, tokens["access_token"]) == 401


def test_a_redirect_uri_that_is_not_the_clients_is_refused(
    site: TestClient, platform: Platform
) -> None:
    info = register(site)
    refused = authorize(
        site, info["client_id"], pkce(), redirect_uri="http://127.0.0.1:9/elsewhere"
    )
    assert "not registered" in refusal_page(refused)
    with session_scope(platform.engine) as session:
        assert session.exec(select(OAuthGrant)).all() == []


def test_a_code_used_twice_is_refused_and_revokes_the_agent_it_made(
    site: TestClient, platform: Platform
) -> None:
    info = register(site)
    pair = pkce()
    code = code_of(answer(site, request_id(authorize(site, info["client_id"], pair))))
    first = exchange(site, info, code, pair.verifier)
    assert first.status_code == 200
    again = exchange(site, info, code, pair.verifier)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    assert mcp_status(site, first.json()["access_token"]) == 401
    assert refresh(site, info, first.json()["refresh_token"]).json()["error"] == "invalid_grant"


@pytest.mark.parametrize("verifier", ["wrong-verifier-" + "x" * 40, None])
def test_a_wrong_or_missing_pkce_verifier_gets_no_token(
    site: TestClient, platform: Platform, verifier: str | None
) -> None:
    info = register(site)
    pair = pkce()
    code = code_of(answer(site, request_id(authorize(site, info["client_id"], pair))))
    refused = exchange(site, info, code, verifier)
    assert refused.status_code == 400
    assert refused.json()["error"] == ("invalid_grant" if verifier else "invalid_request")
    assert "laptop-agent" not in agents_named(platform)
    # The code still works with the right verifier: a guess does not burn it.
    assert exchange(site, info, code, pair.verifier).status_code == 200


def test_only_pkce_s256_is_accepted(site: TestClient) -> None:
    info = register(site)
    plain = authorize(site, info["client_id"], pkce(), code_challenge_method="plain")
    assert "code_challenge_method" in refusal_page(plain)


def test_the_page_without_a_session_sends_the_browser_to_log_in_and_issues_nothing(
    settings: Settings, platform: Platform
) -> None:
    app = create_app(settings, platform=platform, embed_worker=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as anonymous:
        add_operator(platform, "alice")
        info = register(anonymous)
        request = request_id(authorize(anonymous, info["client_id"], pkce()))
        page = anonymous.get("/agents/connect", params={"request": request})
        assert page.status_code == 303
        login = urlsplit(page.headers["location"])
        assert login.path == "/login"
        assert parse_qs(login.query)["next"] == [f"/agents/connect?request={request}"]
        posted = anonymous.post(
            "/agents/connect",
            data={"request": request, "agent": "sneaky", "password": "correct horse battery"},
            headers={"Origin": BASE},
        )
        assert posted.status_code == 403
        # Logging in brings the browser back to the same request, still pending.
        log_in(anonymous, "alice")
        assert anonymous.get("/agents/connect", params={"request": request}).status_code == 200
    with session_scope(platform.engine) as session:
        assert [g.code_hash for g in session.exec(select(OAuthGrant)).all()] == [None]
    assert "sneaky" not in agents_named(platform)


def test_a_viewer_cannot_let_an_agent_in(
    site: TestClient, platform: Platform, settings: Settings
) -> None:
    add_operator(platform, "vera", role="viewer")
    info = register(site)
    request = request_id(authorize(site, info["client_id"], pkce()))
    app = create_app(settings, platform=platform, embed_worker=False, mcp=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as viewer:
        log_in(viewer, "vera")
        page = viewer.get("/agents/connect", params={"request": request})
        assert page.status_code == 403
        assert "only approvers and admins" in page.text
        refused = answer(viewer, request, agent="vera-bot")
        assert refused.status_code == 403
    assert "vera-bot" not in agents_named(platform)


def test_allowing_needs_the_step_up(site: TestClient, platform: Platform) -> None:
    info = register(site)
    request = request_id(authorize(site, info["client_id"], pkce()))
    wrong = answer(site, request, password="not my password")
    assert wrong.status_code == 403
    assert "wrong password" in wrong.text
    empty = answer(site, request, password="")
    assert empty.status_code == 403
    assert "letting an agent sign in needs your current password" in empty.text
    assert "laptop-agent" not in agents_named(platform)


def test_a_name_in_use_is_refused_with_a_message(site: TestClient, platform: Platform) -> None:
    with session_scope(platform.engine) as session:
        add_agent(session=session, name="build-bot", owner="alice", seal=seal_for(platform))
    info = register(site)
    request = request_id(authorize(site, info["client_id"], pkce()))
    taken = answer(site, request, agent="build-bot")
    assert taken.status_code == 422
    assert "already exists: pick another name" in taken.text


def test_denying_sends_access_denied_back(site: TestClient) -> None:
    info = register(site)
    request = request_id(authorize(site, info["client_id"], pkce()))
    denied = answer(site, request, choice="deny")
    assert denied.status_code == 303
    assert denied.headers["location"] == f"{REDIRECT}?" + urlencode(
        {"error": "access_denied", "state": "st-1", "iss": BASE}
    )
    assert site.get("/agents/connect", params={"request": request}).status_code == 404


def test_a_token_for_another_resource_is_refused(site: TestClient, platform: Platform) -> None:
    info = register(site)
    other = authorize(site, info["client_id"], pkce(), resource="https://other.example/mcp")
    assert f"invalid_target: this server issues tokens only for {RESOURCE}" in refusal_page(other)
    pair = pkce()
    code = code_of(answer(site, request_id(authorize(site, info["client_id"], pair))))
    asked = exchange(site, info, code, pair.verifier, resource="https://other.example/mcp")
    assert asked.status_code == 400
    assert asked.json()["error"] == "invalid_target"
    # A token bound to this server as `localhost` does not work when sent to it as 127.0.0.1.
    tokens = exchange(site, info, code, pair.verifier).json()
    assert mcp_status(site, tokens["access_token"]) == 200
    assert mcp_status(site, tokens["access_token"], host="localhost:8000") == 401


def test_refresh_tokens_rotate_and_a_reused_one_revokes_the_family(
    site: TestClient, platform: Platform
) -> None:
    info, tokens = signed_in(site)
    rotated = refresh(site, info, tokens["refresh_token"])
    assert rotated.status_code == 200, rotated.text
    fresh = rotated.json()
    assert fresh["refresh_token"] != tokens["refresh_token"]
    assert mcp_status(site, tokens["access_token"]) == 401  # the old access token is replaced
    assert mcp_status(site, fresh["access_token"]) == 200
    reused = refresh(site, info, tokens["refresh_token"])
    assert reused.json()["error"] == "invalid_grant"
    assert mcp_status(site, fresh["access_token"]) == 401
    assert refresh(site, info, fresh["refresh_token"]).json()["error"] == "invalid_grant"
    assert agents_named(platform)["laptop-agent"].revoked_at is not None


def test_a_revoked_agent_cannot_refresh(site: TestClient, platform: Platform) -> None:
    info, tokens = signed_in(site)
    page = site.get("/agents").text
    assert "laptop-agent" in page
    with session_scope(platform.engine) as session:
        revoke_agent(session=session, name="laptop-agent", seal=seal_for(platform))
    refused = refresh(site, info, tokens["refresh_token"])
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"


def test_access_tokens_expire(
    settings: Settings, platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    with site_with(settings, platform, oauth_token_ttl_s=3) as client:
        _info, tokens = signed_in(client)
        assert tokens["expires_in"] == 3
        assert mcp_status(client, tokens["access_token"]) == 200
        # The clock the bearer check reads, moved past the 3 s instead of waiting them out.
        later = utcnow() + timedelta(seconds=3.2)
        monkeypatch.setattr(agents, "utcnow", lambda: later)
        assert mcp_status(client, tokens["access_token"]) == 401


def test_refresh_tokens_last_as_long_as_the_setting_says(
    settings: Settings, platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    with site_with(settings, platform, oauth_refresh_ttl_s=600) as client:
        info, tokens = signed_in(client)
        with session_scope(platform.engine) as session:
            [row] = session.exec(select(OAuthRefreshToken)).all()
        left = row.expires_at - utcnow()
        assert timedelta(seconds=590) < left <= timedelta(seconds=600)
        rotated = refresh(client, info, tokens["refresh_token"])
        assert rotated.status_code == 200, rotated.text
        # The clock the SDK's token endpoint reads, moved past the 600 s.
        later = time.time() + 601
        monkeypatch.setattr(token_handler, "time", SimpleNamespace(time=lambda: later))
        expired = refresh(client, info, rotated.json()["refresh_token"])
        assert expired.status_code == 400 and expired.json()["error"] == "invalid_grant"


def doc_for(docs: DocumentServer, **changes: Any) -> dict[str, Any]:
    """A client's metadata document naming itself, its name and its redirect URI."""
    return {
        "client_id": docs.client_id(),
        "client_name": "Document Client",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **changes,
    }


@pytest.fixture
def docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DocumentServer]:
    """An https site with client documents, its CA trusted through SSL_CERT_FILE."""
    with document_server(tmp_path) as served:
        monkeypatch.setenv("SSL_CERT_FILE", str(served.ca_file))
        yield served


def test_a_client_id_document_signs_in_without_registering(
    docs: DocumentServer, settings: Settings, platform: Platform
) -> None:
    docs.documents["/client.json"] = doc_for(docs)
    allowing = settings.model_copy(update={"oauth_loopback_clients": True})
    app = create_app(allowing, platform=Platform(allowing), embed_worker=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        add_operator(platform, "alice")
        log_in(client, "alice")
        pair = pkce()
        request = request_id(authorize(client, docs.client_id(), pair))
        page = client.get("/agents/connect", params={"request": request})
        assert "Document Client" in page.text
        assert REDIRECT in page.text
        # Allowing ends in a redirect to the client: the page's CSP lets the form go there.
        assert "form-action 'self' http://127.0.0.1:9" in page.headers["content-security-policy"]
        code = code_of(answer(client, request, agent="doc-agent"))
        tokens = exchange(client, {"client_id": docs.client_id()}, code, pair.verifier)
        assert tokens.status_code == 200, tokens.text
        assert mcp_status(client, tokens.json()["access_token"]) == 200
    assert agents_named(platform)["doc-agent"].owner == "alice"


@pytest.mark.parametrize(
    "problem",
    ["loopback", "names another client", "a secret method", "untrusted certificate"],
)
def test_a_client_id_document_that_cannot_be_trusted_is_refused(
    docs: DocumentServer,
    settings: Settings,
    platform: Platform,
    monkeypatch: pytest.MonkeyPatch,
    problem: str,
) -> None:
    docs.documents["/client.json"] = doc_for(docs)
    if problem == "names another client":
        docs.documents["/client.json"] = doc_for(docs, client_id="https://other.example/c.json")
    if problem == "a secret method":
        docs.documents["/client.json"] = doc_for(
            docs, token_endpoint_auth_method="client_secret_post"
        )
    if problem == "untrusted certificate":
        monkeypatch.delenv("SSL_CERT_FILE")
    allowing = settings.model_copy(update={"oauth_loopback_clients": problem != "loopback"})
    app = create_app(allowing, platform=Platform(allowing), embed_worker=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        refused = refusal_page(authorize(client, docs.client_id(), pkce()))
        host = urlsplit(docs.url).hostname
        assert f"the client&#39;s metadata document at {host} cannot be used: " in refused
        assert {
            "loopback": "is a loopback or private address",
            "names another client": "does not name itself as client_id",
            "a secret method": "only token_endpoint_auth_method &#39;none&#39;",
            "untrusted certificate": "CERTIFICATE_VERIFY_FAILED",
        }[problem] in refused
    # Loopback is refused before any fetch; a certificate aat does not trust, at the handshake.
    read = problem in ("names another client", "a secret method")
    assert docs.fetched == (["/client.json"] if read else [])
    with session_scope(platform.engine) as session:
        assert session.exec(select(OAuthGrant)).all() == []


def test_a_name_that_rebinds_to_loopback_after_the_check_reaches_nothing(
    docs: DocumentServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A resolver that answers the client's host with a public address once, then with the
    # loopback address the document server listens on: DNS rebinding, the check passed on the
    # first answer. aat must connect to the address it checked, never resolve again.
    real = socket.getaddrinfo
    answers = iter(["93.184.215.14"])

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host  # anyio passes bytes
        if name != REBINDING_HOST:
            return real(host, port, *args, **kwargs)
        address = next(answers, "127.0.0.1")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    port = urlsplit(docs.url).port
    client_id = f"https://{REBINDING_HOST}:{port}/client.json"
    docs.documents["/client.json"] = {**doc_for(docs), "client_id": client_id}
    with pytest.raises(ClientDocumentError):
        anyio.run(lambda: fetch_document(client_id, allow_private=False))
    assert docs.fetched == []  # the loopback server was never reached


def test_a_document_clients_loopback_redirect_matches_on_any_port(
    docs: DocumentServer, settings: Settings, platform: Platform
) -> None:
    """As Claude Code's document names `http://localhost/callback` and listens on a free port."""
    docs.documents["/client.json"] = doc_for(docs, redirect_uris=["http://localhost/callback"])
    allowing = settings.model_copy(update={"oauth_loopback_clients": True})
    app = create_app(allowing, platform=Platform(allowing), embed_worker=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        for uri in ("http://localhost:52190/callback", "http://localhost/callback"):
            assert authorize(client, docs.client_id(), pkce(), redirect_uri=uri).status_code == 302
        for uri in (
            "http://localhost:52190/other",
            "http://127.0.0.1:52190/callback",
            "https://localhost:52190/callback",
            "http://localhost.evil.example:52190/callback",
        ):
            assert "not registered" in refusal_page(
                authorize(client, docs.client_id(), pkce(), redirect_uri=uri)
            ), uri


def test_housekeeping_forgets_expired_requests_and_refresh_tokens(
    site: TestClient, platform: Platform
) -> None:
    _info, _tokens = signed_in(site)
    request_id(authorize(site, register(site)["client_id"], pkce()))  # left pending
    later = utcnow() + timedelta(days=31)
    with session_scope(platform.engine) as session:
        assert prune_expired(session=session, now=utcnow()) == 0
        assert prune_expired(session=session, now=later) == 3  # 2 grants, 1 refresh token


LOCAL = "http://localhost:8000"  # where passkeys work


def test_a_passkey_allows_only_the_request_and_name_it_was_made_for(
    settings: Settings, platform: Platform
) -> None:
    app = create_app(settings, platform=platform, embed_worker=False)
    with TestClient(app, base_url=LOCAL, follow_redirects=False) as client:
        add_operator(platform, "alice")
        form = {"username": "alice", "password": PASSWORD}
        assert client.post("/login", data=form, headers={"Origin": LOCAL}).status_code == 303
        token = csrf(client, "/account")
        headers = {"Origin": LOCAL, "X-CSRF-Token": token}
        soft = SoftAuthenticator(origin=LOCAL)
        options = client.post(
            "/account/passkeys/options", json={"password": PASSWORD}, headers=headers
        )
        credential = soft.register(options.json())
        made = client.post(
            "/account/passkeys", json={"credential": credential, "label": "soft"}, headers=headers
        )
        assert made.status_code == 200, made.text
        info = register(client)
        request = request_id(authorize(client, info["client_id"], pkce(), resource=f"{LOCAL}/mcp"))

        def answer_with_passkey(bound_to: str, agent: str) -> Any:
            target = {"request": request, "agent": bound_to}
            body = {"purpose": "change", "change": "agent-sign-in", "target": target}
            challenge = client.post("/stepup/options", json=body, headers=headers).json()
            assertion = json.dumps(soft.assert_for(challenge))
            data = {"csrf_token": token, "request": request, "agent": agent, "passkey": assertion}
            return client.post("/agents/connect", data=data, headers={"Origin": LOCAL})

        refused = answer_with_passkey("some-other-name", "laptop-agent")
        assert refused.status_code == 403
        allowed = answer_with_passkey("laptop-agent", "laptop-agent")
        assert code_of(allowed)
    assert agents_named(platform) == {}  # allowed; the agent is made when the code is used
