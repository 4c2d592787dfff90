"""A hand-written OAuth client for the sign-in tests: each step of the authorization code flow
as one function, so a test can break exactly one of them."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from dash_helpers import BASE, ORIGIN, PASSWORD

REDIRECT = "http://127.0.0.1:9/callback"
RESOURCE = f"{BASE}/mcp"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Pkce:
    """A PKCE pair (S256)."""

    verifier: str
    challenge: str


def pkce() -> Pkce:
    """A fresh verifier and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return Pkce(verifier, base64.urlsafe_b64encode(digest).decode().rstrip("="))


def register(client: httpx.Client, redirect: str = REDIRECT, name: str = "test client") -> Any:
    """Dynamic registration; the client's information (id and secret)."""
    r = client.post("/register", json={"redirect_uris": [redirect], "client_name": name})
    assert r.status_code == 201, r.text
    return r.json()


def authorize(client: httpx.Client, client_id: str, pair: Pkce, **overrides: str) -> httpx.Response:
    """GET /authorize with the usual parameters, any of them replaced."""
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": pair.challenge,
        "code_challenge_method": "S256",
        "state": "st-1",
        "resource": RESOURCE,
        **overrides,
    }
    return client.get("/authorize", params={k: v for k, v in params.items() if v})


def request_id(response: httpx.Response) -> str:
    """The sign-in request id of the dashboard page `/authorize` sent the browser to."""
    assert response.status_code == 302, response.text
    location = urlsplit(response.headers["location"])
    assert location.path == "/agents/connect", location
    return parse_qs(location.query)["request"][0]


def csrf_of(html: str) -> str:
    """The CSRF token in a page."""
    match = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert match, html[:500]
    return match.group(1)


def answer(
    client: httpx.Client,
    request: str,
    *,
    agent: str = "laptop-agent",
    password: str = PASSWORD,
    choice: str = "allow",
) -> httpx.Response:
    """The operator's answer on the sign-in page (the page is read first for its CSRF token)."""
    page = client.get("/agents/connect", params={"request": request})
    token = csrf_of(page.text) if page.status_code == 200 else csrf_of(client.get("/").text)
    data = {"csrf_token": token, "request": request, "agent": agent, "password": password}
    return client.post("/agents/connect", data={**data, "answer": choice}, headers=ORIGIN)


def code_of(response: httpx.Response) -> str:
    """The code in the redirect back to the client."""
    assert response.status_code == 303, response.text[:800]
    location = response.headers["location"]
    assert location.startswith(REDIRECT), location
    query = parse_qs(urlsplit(location).query)
    assert query["state"] == ["st-1"]
    return query["code"][0]


def exchange(
    client: httpx.Client, info: Any, code: str, verifier: str | None, **extra: str
) -> httpx.Response:
    """POST /token for a code (client_secret_post, as the registration said)."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": info["client_id"],
        "client_secret": info.get("client_secret", ""),
        "resource": RESOURCE,
        **extra,
    }
    if verifier is not None:
        form["code_verifier"] = verifier
    return client.post("/token", data={k: v for k, v in form.items() if v})


def refresh(client: httpx.Client, info: Any, token: str) -> httpx.Response:
    """POST /token for a refresh token."""
    form = {
        "grant_type": "refresh_token",
        "refresh_token": token,
        "client_id": info["client_id"],
        "client_secret": info.get("client_secret", ""),
    }
    return client.post("/token", data={k: v for k, v in form.items() if v})


def mcp_status(client: httpx.Client, token: str, host: str | None = None) -> int:
    """The status `/mcp` answers an initialize sent with this bearer token."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    if host:
        headers["Host"] = host
    return client.post("/mcp", json=INIT, headers=headers).status_code
