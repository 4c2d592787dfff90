"""Who may decide cannot be changed with a stolen cookie or a database write (SPEC §19).

Each test is an attack that must fail, over real HTTP against the dashboard on SQLite and
PostgreSQL: registering a passkey with the session cookie alone (a software authenticator
stands in for the attacker's, as in the review that found it), changing a role, a password
or minting a token without a step-up, and rows inserted by SQL (an operator, a passkey, a
session) that try to log in or approve.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from dash_helpers import BASE, ORIGIN, PASSWORD, add_operator, csrf, log_in, queue_send
from fastapi.testclient import TestClient
from soft_authenticator import SoftAuthenticator
from sqlalchemy import text
from sqlmodel import select
from webauthn.helpers import bytes_to_base64url

from dashboard.setup import SETUP_TOKEN_KEY, print_setup_link
from webplatform.jobs import decisions
from webplatform.jobs import states as jobs
from webplatform.store.engine import session_scope
from webplatform.store.models import (
    AgentToken,
    AuditEvent,
    Job,
    JobState,
    Operator,
    Passkey,
    utcnow,
)
from webplatform.store.passwords import hash_password
from webplatform.store.seals import FORGED_EVENT, sign_row
from webplatform.trust.authority import seal_for
from webplatform.trust.stepup import StepUp, StepUpMethod

LOCAL = "http://localhost:8000"  # the passkeys' relying party
LOCAL_ORIGIN = {"Origin": LOCAL}


@pytest.fixture
def local(app: Any, platform: Any) -> Iterator[TestClient]:
    """Alice (admin), logged in at http://localhost:8000, where passkeys work."""
    add_operator(platform, "alice")
    with TestClient(app, base_url=LOCAL, follow_redirects=False) as client:
        r = client.post(
            "/login", data={"username": "alice", "password": PASSWORD}, headers=LOCAL_ORIGIN
        )
        assert r.status_code == 303, r.text
        yield client


def _post_json(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    headers = {**LOCAL_ORIGIN, "X-CSRF-Token": csrf(client, "/account")}
    return client.post(path, json=body, headers=headers)


def _register(client: TestClient, soft: SoftAuthenticator, proof: dict[str, Any]) -> Any:
    """The account page's two steps: options (with `proof`), then the registration."""
    options = _post_json(client, "/account/passkeys/options", proof)
    if options.status_code != 200:
        return options
    credential = soft.register(options.json())
    return _post_json(client, "/account/passkeys", {"credential": credential, "label": "soft"})


def _passkeys(platform: Any) -> list[Passkey]:
    with session_scope(platform.engine, write=False) as session:
        return list(session.exec(select(Passkey)).all())


def _events(platform: Any, event: str) -> list[AuditEvent]:
    with session_scope(platform.engine, write=False) as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.event == event)).all())


def _job(platform: Any, job_id: int) -> Job:
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job


def _approve_with(client: TestClient, job: Job, soft: SoftAuthenticator) -> Any:
    """What the stolen cookie's page does: a challenge for the job, the attacker's assertion."""
    body = {"purpose": "approve", "digest": job.args_digest, "job_id": job.id}
    options = _post_json(client, "/stepup/options", body)
    assert options.status_code == 200, options.text
    form = {
        "csrf_token": csrf(client, "/account"),
        "digest": job.args_digest,
        "return_to": "job",
        "passkey": json.dumps(soft.assert_for(options.json())),
    }
    return client.post(f"/jobs/{job.id}/approve", data=form, headers=LOCAL_ORIGIN)


def test_the_session_cookie_alone_cannot_register_a_passkey(platform: Any, local: Any) -> None:
    attacker = SoftAuthenticator(origin=LOCAL)
    refused = _register(local, attacker, {})
    assert refused.status_code == 403
    assert "adding a passkey needs your current password" in refused.json()["error"]
    wrong = _register(local, attacker, {"password": "a guess"})
    assert wrong.status_code == 403 and "wrong password" in wrong.json()["error"]
    # Skipping the options step: no challenge was issued, so nothing to answer.
    made_up = attacker.register({"challenge": bytes_to_base64url(os.urandom(32))})
    skipped = _post_json(local, "/account/passkeys", {"credential": made_up, "label": "x"})
    assert skipped.status_code == 400 and "stale or was already used" in skipped.text
    assert _passkeys(platform) == []
    refusals = _events(platform, "step-up-refused")
    assert [e.detail for e in refusals] == [
        "change (passkey-add) refused: step-up none missing or invalid",
        "change (passkey-add) refused: step-up password missing or invalid",
    ]

    # The same authenticator, with the operator's password: registered, and it approves.
    assert _register(local, attacker, {"password": PASSWORD}).status_code == 200
    job = _job(platform, queue_send(platform).job or 0)
    assert _approve_with(local, job, attacker).status_code == 303
    assert _job(platform, job.id or 0).state is JobState.approved


def test_a_passkey_proof_for_one_change_confirms_no_other(platform: Any, local: Any) -> None:
    own = SoftAuthenticator(origin=LOCAL)
    assert _register(local, own, {"password": PASSWORD}).status_code == 200
    # An assertion made for adding a passkey, sent to mint an agent token.
    options = _post_json(
        local, "/stepup/options", {"purpose": "change", "change": "passkey-add", "target": {}}
    )
    assertion = own.assert_for(options.json())
    form = {
        "csrf_token": csrf(local, "/agents"),
        "name": "bot",
        "passkey": json.dumps(assertion),
    }
    r = local.post("/agents", data=form, headers=LOCAL_ORIGIN)
    assert r.status_code == 403 and "another call or change" in r.text
    # The next passkey may be confirmed with this one instead of the password.
    options = _post_json(
        local, "/stepup/options", {"purpose": "change", "change": "passkey-add", "target": {}}
    )
    second = SoftAuthenticator(origin=LOCAL)
    added = _register(local, second, {"passkey": own.assert_for(options.json())})
    assert added.status_code == 200, added.text
    assert len(_passkeys(platform)) == 2


def test_removing_a_passkey_needs_a_step_up(platform: Any, local: Any) -> None:
    assert _register(local, SoftAuthenticator(origin=LOCAL), {"password": PASSWORD}).status_code
    form = {"csrf_token": csrf(local, "/account")}
    r = local.post("/account/passkeys/1/remove", data=form, headers=LOCAL_ORIGIN)
    assert r.status_code == 403 and "removing a passkey needs your current password" in r.text
    assert len(_passkeys(platform)) == 1
    form["password"] = PASSWORD
    r = local.post("/account/passkeys/1/remove", data=form, headers=LOCAL_ORIGIN)
    assert r.status_code == 303 and _passkeys(platform) == []


def test_a_passkey_row_inserted_by_sql_is_refused_at_step_up(platform: Any, local: Any) -> None:
    own = SoftAuthenticator(origin=LOCAL)
    assert _register(local, own, {"password": PASSWORD}).status_code == 200
    attacker = SoftAuthenticator(origin=LOCAL)
    with session_scope(platform.engine) as session:
        session.connection().execute(
            text(
                "INSERT INTO passkey (operator, credential_id, public_key, sign_count, label, "
                "created_at) VALUES ('alice', :cid, :pk, 0, 'laptop', :at)"
            ),
            {
                "cid": bytes_to_base64url(attacker.credential_id),
                "pk": bytes_to_base64url(attacker.cose_public_key()),
                "at": utcnow().replace(tzinfo=None),
            },
        )
    job = _job(platform, queue_send(platform).job or 0)
    refused = _approve_with(local, job, attacker)
    assert refused.status_code == 403 and "not registered to you" in refused.text
    assert _job(platform, job.id or 0).state is JobState.pending_approval
    assert _approve_with(local, job, attacker).status_code == 403
    forged = [e.detail for e in _events(platform, FORGED_EVENT)]
    assert len(forged) == 1 and forged[0].startswith("passkey 2 of alice: its signature")
    page = local.get("/account").text
    assert "not signed by aat (added or changed outside it): ignored" in page


def test_an_operator_row_inserted_by_sql_cannot_log_in_or_approve(
    platform: Any, client: TestClient
) -> None:
    add_operator(platform, "alice")
    with session_scope(platform.engine) as session:
        session.connection().execute(
            text(
                "INSERT INTO operator (name, password_hash, created_at, role) "
                "VALUES ('mallory', :hash, :at, 'approver')"
            ),
            {"hash": hash_password(PASSWORD), "at": utcnow().replace(tzinfo=None)},
        )
    for _ in range(2):
        r = client.post(
            "/login", data={"username": "mallory", "password": PASSWORD}, headers=ORIGIN
        )
        assert r.status_code == 401 and "aat_session" not in r.cookies
    assert len(_events(platform, FORGED_EVENT)) == 1  # reported once per row
    # At decision time too: even with a step-up in hand, the row decides nothing.
    job = _job(platform, queue_send(platform).job or 0)
    step_up = StepUp(operator="mallory", digest=job.args_digest, method=StepUpMethod.password)
    with pytest.raises(jobs.NotAllowed, match="signature does not verify"):
        decisions.approve(
            platform=platform,
            job_id=job.id or 0,
            operator="mallory",
            digest=job.args_digest,
            address=None,
            step_up=step_up,
        )
    assert _job(platform, job.id or 0).state is JobState.pending_approval


def test_a_viewer_promoted_by_sql_is_no_operator_at_all(platform: Any, client_as: Any) -> None:
    add_operator(platform, "alice")
    add_operator(platform, "vic", "viewer")
    vic = client_as("vic")
    with session_scope(platform.engine) as session:
        session.connection().execute(text("UPDATE operator SET role = 'admin' WHERE name = 'vic'"))
    job_id = queue_send(platform).job
    assert vic.get("/approvals").status_code in (303, 401)  # the session's operator is gone
    form = {"digest": _job(platform, job_id or 0).args_digest, "password": PASSWORD}
    r = vic.post(f"/jobs/{job_id}/approve", data=form, headers=ORIGIN)
    assert r.status_code in (303, 401, 403) and "/login" in r.headers.get("location", "/login")
    assert _job(platform, job_id or 0).state is JobState.pending_approval


def test_a_session_row_inserted_by_sql_logs_no_one_in(platform: Any, client: TestClient) -> None:
    add_operator(platform, "alice")
    token = "chosen-by-the-attacker"
    with session_scope(platform.engine) as session:
        session.connection().execute(
            text(
                "INSERT INTO operator_session (token_hash, operator, created_at, expires_at, "
                "last_seen_at) VALUES (:h, 'alice', :now, :later, :now)"
            ),
            {
                "h": hashlib.sha256(token.encode()).hexdigest(),
                "now": utcnow().replace(tzinfo=None),
                "later": (utcnow() + timedelta(days=1)).replace(tzinfo=None),
            },
        )
    client.cookies.set("aat_session", token)
    r = client.get("/approvals")
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert len(_events(platform, FORGED_EVENT)) == 1


def test_a_database_writer_cannot_reopen_first_run_setup(
    settings: Any, platform: Any, client: TestClient
) -> None:
    link = print_setup_link(settings, platform, out=io.StringIO())
    assert link is not None
    form = {"token": link.split("token=")[1], "username": "root", "password": PASSWORD}
    created = client.post("/setup", data={**form, "password2": PASSWORD}, headers=ORIGIN)
    assert created.status_code == 303
    # Every operator and every marker the database keeps gone, and a setup token planted.
    planted = "planted-setup-token"
    with session_scope(platform.engine) as session:
        connection = session.connection()
        connection.execute(text("DELETE FROM operator"))
        connection.execute(text("DELETE FROM meta"))
        connection.execute(
            text("INSERT INTO meta (key, value) VALUES (:k, :v)"),
            {"k": SETUP_TOKEN_KEY, "v": hashlib.sha256(planted.encode()).hexdigest()},
        )
    assert client.get(f"/setup?token={planted}").status_code == 404
    attempt = {"token": planted, "username": "mallory", "password": PASSWORD}
    refused = client.post("/setup", data={**attempt, "password2": PASSWORD}, headers=ORIGIN)
    assert refused.status_code == 400 and "already done" in refused.text
    with session_scope(platform.engine, write=False) as session:
        assert session.exec(select(Operator)).all() == []
    assert print_setup_link(settings, platform, out=io.StringIO()) is None


def _change_form(client: TestClient, **fields: str) -> dict[str, str]:
    return {"csrf_token": csrf(client, "/account"), **fields}


def test_changing_a_role_needs_a_step_up(platform: Any, alice: TestClient) -> None:
    add_operator(platform, "bob")
    cookie_alone = _change_form(alice, role="admin")
    r = alice.post("/operators/bob/role", data=cookie_alone, headers=ORIGIN)
    assert r.status_code == 403 and "changing a role needs your current password" in r.text
    wrong = _change_form(alice, role="admin", password="a guess")
    assert alice.post("/operators/bob/role", data=wrong, headers=ORIGIN).status_code == 403
    assert 'data-operator="bob"' in alice.get("/account").text
    with session_scope(platform.engine, write=False) as session:
        from webplatform.store.operators import operator_role

        assert operator_role(session=session, name="bob", seal=seal_for(platform)) == "approver"
    right = _change_form(alice, role="viewer", password=PASSWORD)
    assert alice.post("/operators/bob/role", data=right, headers=ORIGIN).status_code == 303
    with session_scope(platform.engine, write=False) as session:
        assert operator_role(session=session, name="bob", seal=seal_for(platform)) == "viewer"


def test_only_an_admin_changes_roles(platform: Any, client_as: Any) -> None:
    add_operator(platform, "alice")
    add_operator(platform, "bob")
    bob = client_as("bob")
    form = _change_form(bob, role="admin", password=PASSWORD)
    assert bob.post("/operators/bob/role", data=form, headers=ORIGIN).status_code == 403


def test_changing_a_password_needs_the_current_one(platform: Any, alice: TestClient) -> None:
    fields = {"new_password": "a new long one", "new_password2": "a new long one"}
    r = alice.post("/account/password", data=_change_form(alice, **fields), headers=ORIGIN)
    assert r.status_code == 403 and "changing your password needs" in r.text
    wrong = _change_form(alice, password="a guess", **fields)
    assert alice.post("/account/password", data=wrong, headers=ORIGIN).status_code == 403
    right = _change_form(alice, password=PASSWORD, **fields)
    assert alice.post("/account/password", data=right, headers=ORIGIN).status_code == 303
    # This browser stays logged in with a new session; the old password is gone.
    assert alice.get("/approvals").status_code == 200
    with TestClient(alice.app, base_url=BASE, follow_redirects=False) as other:
        old = other.post("/login", data={"username": "alice", "password": PASSWORD}, headers=ORIGIN)
        assert old.status_code == 401
        log_in(other, "alice", "a new long one")


def test_minting_an_agent_token_needs_a_step_up(platform: Any, alice: TestClient) -> None:
    form = {"csrf_token": csrf(alice, "/agents"), "name": "build-bot"}
    r = alice.post("/agents", data=form, headers=ORIGIN)
    assert r.status_code == 403 and "minting an agent token needs" in r.text
    assert "minted-token" not in r.text
    with session_scope(platform.engine, write=False) as session:
        assert session.exec(select(AgentToken)).all() == []


def test_the_card_shows_a_passkey_added_within_the_last_day(platform: Any, local: Any) -> None:
    assert _register(local, SoftAuthenticator(origin=LOCAL), {"password": PASSWORD}).status_code
    job_id = queue_send(platform).job
    card = local.get("/approvals").text
    assert "Your newest passkey, “soft” (passkey 1), was added" in card
    assert "Your newest passkey" in local.get(f"/jobs/{job_id}").text
    # Added two days ago (and signed so, as aat would have): no warning.
    with session_scope(platform.engine) as session:
        key = session.exec(select(Passkey)).one()
        key.created_at = utcnow() - timedelta(days=2)
        sign_row(seal_for(platform), key)
        session.add(key)
    assert "Your newest passkey" not in local.get("/approvals").text
