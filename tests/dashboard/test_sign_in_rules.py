"""Sign-in follows the current specifications (SPEC §20), each rule as an attack on it.

- Answers to the client carry `iss` (RFC 9207), the issuer the metadata names.
- aat's origin is no open redirector: registering needs no login, so until an operator has
  seen a redirect URI on the dashboard's page, every refusal at `/authorize` is a page of
  aat's, never a redirect to that URI.
- Redirect URIs are `https` or loopback `http`, at registration, in a client's document, and
  for a client stored before the rule.
- Well-known paths aat does not serve answer 404, not the login page.

The app is the real dashboard on this test's database (SQLite and PostgreSQL), with the
hand-written client of sign_in_helpers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from client_documents import DocumentServer, document_server
from dash_helpers import BASE, add_operator, log_in
from fastapi.testclient import TestClient
from sign_in_helpers import answer, authorize, pkce, register, request_id
from sqlmodel import select

from dashboard.app import create_app
from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import session_scope
from webplatform.store.models import OAuthClient, OAuthGrant, utcnow

EVIL = "https://evil.example/landing"


@pytest.fixture
def anonymous(settings: Settings, platform: Platform) -> Iterator[TestClient]:
    """The dashboard with its OAuth endpoints, reached by someone with no session."""
    app = create_app(settings, platform=platform, embed_worker=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        add_operator(platform, "alice")
        yield client


def refusal_page(response: Any) -> str:
    """The page `/authorize` answers a request it refuses: 400, HTML, no redirect."""
    assert response.status_code == 400, (response.status_code, response.headers)
    assert "location" not in response.headers
    assert response.headers["content-type"].startswith("text/html")
    assert "<h1>Sign-in refused</h1>" in response.text
    return str(response.text)


def query_of(location: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(location).query)


def test_allowing_and_denying_send_iss_the_metadata_names(anonymous: TestClient) -> None:
    issuer = anonymous.get("/.well-known/oauth-authorization-server").json()["issuer"]
    assert issuer == BASE
    log_in(anonymous, "alice")
    info = register(anonymous)
    allowed = answer(anonymous, request_id(authorize(anonymous, info["client_id"], pkce())))
    assert allowed.status_code == 303, allowed.text
    assert query_of(allowed.headers["location"])["iss"] == [issuer]
    denied = answer(
        anonymous, request_id(authorize(anonymous, info["client_id"], pkce())), choice="deny"
    )
    query = query_of(denied.headers["location"])
    assert (query["error"], query["iss"]) == (["access_denied"], [issuer])


@pytest.mark.parametrize(
    "broken",
    [
        {"code_challenge": ""},  # PKCE missing
        {"code_challenge_method": "plain"},
        {"response_type": "token"},
        {"resource": "https://other.example/mcp"},
    ],
    ids=["no-pkce", "plain-pkce", "implicit", "other-resource"],
)
def test_an_anonymous_client_cannot_make_aat_redirect_to_its_uri(
    anonymous: TestClient, platform: Platform, broken: dict[str, str]
) -> None:
    # Finding 6: registering takes no login, and /authorize sent request errors to whatever
    # redirect URI was registered, so aat's origin forwarded anyone anywhere.
    info = register(anonymous, redirect=EVIL)
    refused = authorize(anonymous, info["client_id"], pkce(), redirect_uri=EVIL, **broken)
    page = refusal_page(refused)
    assert "evil.example" not in refused.headers.get("location", "")
    assert "Nothing was sent back to the client" in page
    with session_scope(platform.engine) as session:
        assert session.exec(select(OAuthGrant)).all() == []


def test_the_refusal_page_names_what_was_wrong_escaped(anonymous: TestClient) -> None:
    hostile = '<img src=x onerror="alert(1)">'
    page = refusal_page(authorize(anonymous, hostile, pkce()))
    assert "no client &#39;&lt;img src=x onerror=" in page
    assert "<img src=x" not in page


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(document.cookie)//",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "http://evil.example/callback",
        "http://192.168.1.20:8080/callback",
        "http://localhost.evil.example/callback",
        "https://app.example/callback#fragment",
    ],
)
def test_registration_refuses_redirect_uris_that_are_not_https_or_loopback(
    anonymous: TestClient, platform: Platform, uri: str
) -> None:
    refused = anonymous.post("/register", json={"redirect_uris": [uri], "client_name": "x"})
    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["error"] == "invalid_redirect_uri"
    assert body["error_description"].startswith("redirect URI ")
    assert "\n" not in body["error_description"]
    with session_scope(platform.engine) as session:
        assert session.exec(select(OAuthClient)).all() == []


@pytest.mark.parametrize(
    "uri",
    [
        "https://app.example/callback",
        "http://127.0.0.1:53682/callback",
        "http://localhost/callback",
        "http://[::1]:8080/callback",
    ],
)
def test_registration_takes_https_and_loopback_http(anonymous: TestClient, uri: str) -> None:
    assert register(anonymous, redirect=uri)["redirect_uris"] == [uri]


def test_a_client_stored_before_the_rule_gets_no_redirect_to_its_uri(
    anonymous: TestClient, platform: Platform
) -> None:
    hostile = "javascript:alert(document.domain)//"
    info = {"client_id": "old-client", "redirect_uris": [hostile], "client_name": "old"}
    info |= {"token_endpoint_auth_method": "none"}
    with session_scope(platform.engine) as session:
        session.add(OAuthClient(client_id="old-client", info=json.dumps(info), created_at=utcnow()))
    page = refusal_page(authorize(anonymous, "old-client", pkce(), redirect_uri=hostile))
    assert "scheme &#39;javascript&#39; is not https or loopback http" in page


@pytest.fixture
def docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DocumentServer]:
    with document_server(tmp_path) as served:
        monkeypatch.setenv("SSL_CERT_FILE", str(served.ca_file))
        yield served


def test_a_client_document_with_a_plain_http_redirect_gets_a_page_naming_host_and_reason(
    docs: DocumentServer, settings: Settings, platform: Platform
) -> None:
    docs.documents["/client.json"] = {
        "client_id": docs.client_id(),
        "client_name": "Document Client",
        "redirect_uris": ["http://evil.example/callback"],
        "token_endpoint_auth_method": "none",
    }
    allowing = settings.model_copy(update={"oauth_loopback_clients": True})
    app = create_app(allowing, platform=Platform(allowing), embed_worker=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        refused = authorize(
            client, docs.client_id(), pkce(), redirect_uri="http://evil.example/callback"
        )
        page = refusal_page(refused)
    host = urlsplit(docs.url).hostname
    assert f"metadata document at {host} cannot be used" in page
    assert "http is allowed only on a loopback address" in page


def test_a_client_document_that_cannot_be_fetched_gets_a_page_naming_host_and_reason(
    anonymous: TestClient,
) -> None:
    # Nothing listens there, and the host is not loopback: the fetch itself fails.
    client_id = "https://client-docs.invalid/oauth/client.json"
    page = refusal_page(authorize(anonymous, client_id, pkce()))
    assert "metadata document at client-docs.invalid cannot be used" in page
    assert "cannot resolve client-docs.invalid" in page
    assert "{" not in page.split("<main")[1]  # no raw JSON


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/openid-configuration",
        "/.well-known/oauth-authorization-server/mcp",
        "/.well-known/security.txt",
    ],
)
def test_well_known_paths_aat_does_not_serve_answer_404(anonymous: TestClient, path: str) -> None:
    assert anonymous.get(path).status_code == 404
    for served in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-authorization-server",
    ):
        assert anonymous.get(served).status_code == 200
