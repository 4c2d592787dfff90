"""Helpers for the dashboard tests: operators, logging in, CSRF tokens, queued calls."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient
from stepup_helpers import preview_landed

from webplatform.jobs.answers import Answer
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store import operators
from webplatform.store import previews as preview_rows
from webplatform.store.engine import session_scope
from webplatform.store.models import Surface
from webplatform.trust.authority import seal_for
from webplatform.trust.permissions import ROLE_BOOK

BASE = "http://127.0.0.1:8000"
ORIGIN = {"Origin": BASE}
PASSWORD = "correct horse battery"


def add_operator(
    platform: Platform, name: str, role: str | None = None, password: str = PASSWORD
) -> None:
    """Create an operator as `aat operator add` does, signed with the home's key (`role`:
    the default when None)."""
    seal = seal_for(platform)
    with session_scope(platform.engine) as session:
        operators.add_operator(
            session=session, name=name, password=password, roles=ROLE_BOOK.giving(role), seal=seal
        )


def log_in(client: TestClient, name: str, password: str = PASSWORD) -> None:
    """Log `client` in through the login form."""
    r = client.post(
        "/login", data={"username": name, "password": password, "next": "/"}, headers=ORIGIN
    )
    assert r.status_code == 303, r.text
    assert "aat_session" in r.cookies or client.cookies.get("aat_session")


def csrf(client: TestClient, path: str = "/") -> str:
    """The CSRF token a page carries for this session."""
    html = client.get(path).text
    match = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert match, html[:500]
    return match.group(1)


def queue_send(platform: Platform, client: str = "test-agent", **args: Any) -> Answer:
    """An MCP-like request for the irreversible outbox send-message; returns its answer."""
    call = {"to": "bob@example.org", "subject": "hi", "body": "hello", **args}
    return request_run(
        platform=platform,
        call=RunCall(kind="tool", name="outbox", action="send-message", args=call),
        actor=Actor(surface=Surface.mcp_http, client=client),
        consent=Consent.QUEUE,
    )


def card_preview(platform: Platform, job_id: int) -> dict[str, str]:
    """What a card's decision forms send of job `job_id`'s preview, once it has landed (an
    operator decides on the preview, SPEC §20): `{"preview": digest}`, or nothing when the
    job has none."""
    preview_landed(platform, job_id)
    with session_scope(platform.engine, write=False) as session:
        row = preview_rows.preview_of(session=session, job_id=job_id)
        return {} if row is None else {"preview": row.digest or ""}
