"""Helpers for dashboard tests that confirm with a passkey: a session at localhost (the
passkeys' relying party) and a software authenticator registered to it."""

from __future__ import annotations

from typing import Any

from dash_helpers import PASSWORD, csrf
from fastapi.testclient import TestClient
from soft_authenticator import SoftAuthenticator

LOCAL = "http://localhost:8000"
LOCAL_ORIGIN = {"Origin": LOCAL}


def log_in_locally(client: TestClient, name: str) -> None:
    """Log `client` (based at LOCAL) in as `name`."""
    login = {"username": name, "password": PASSWORD}
    r = client.post("/login", data=login, headers=LOCAL_ORIGIN)
    assert r.status_code == 303, r.text


def post_json(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    """POST `body` as JSON with the session's CSRF token, as static/passkeys.js does."""
    headers = {**LOCAL_ORIGIN, "X-CSRF-Token": csrf(client, "/account")}
    return client.post(path, json=body, headers=headers)


def with_passkey(client: TestClient) -> SoftAuthenticator:
    """A software authenticator, registered as the logged-in operator's passkey."""
    soft = SoftAuthenticator(origin=LOCAL)
    options = post_json(client, "/account/passkeys/options", {"password": PASSWORD})
    assert options.status_code == 200, options.text
    made = {"credential": soft.register(options.json()), "label": "soft"}
    assert post_json(client, "/account/passkeys", made).status_code == 200
    return soft
