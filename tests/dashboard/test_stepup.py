"""Step-up approvals over HTTP: a session cookie and CSRF token alone never approve; the
operator's password typed with the decision does, once checked and throttled; the audit
trail names the step-up, never the password. (Passkeys: tests/browser/test_stepup_browser.py.)"""

from __future__ import annotations

import pytest
from dash_helpers import ORIGIN, PASSWORD, csrf, queue_send
from sqlmodel import select
from stepup_helpers import job_step_up

from dashboard import passkeys
from webplatform.config import Settings
from webplatform.jobs import decisions
from webplatform.jobs import states as jobs
from webplatform.store.engine import session_scope
from webplatform.store.models import AuditEvent, JobState
from webplatform.trust.stepup import StepUpMismatch


def _job(platform, job_id):
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job


def _events(platform, job_id):
    with session_scope(platform.engine) as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.job_id == job_id)).all())


def _approve(client, platform, job_id, headers=ORIGIN, **extra):
    form = {"csrf_token": csrf(client), "digest": _job(platform, job_id).args_digest, **extra}
    return client.post(f"/jobs/{job_id}/approve", data=form, headers=headers)


def test_a_replayed_approval_with_cookie_and_csrf_but_no_step_up_is_refused(platform, alice):
    job_id = queue_send(platform).job
    r = _approve(alice, platform, job_id, return_to="job")
    assert r.status_code == 403
    assert "approving needs a fresh proof" in r.text and "password" in r.text
    # From the live queue (htmx), the same refusal is swapped into the notice.
    r = _approve(alice, platform, job_id, headers={**ORIGIN, "HX-Request": "true"})
    assert "approving needs a fresh proof" in r.text
    assert _job(platform, job_id).state is JobState.pending_approval
    refused = [e for e in _events(platform, job_id) if e.event == "step-up-refused"]
    assert len(refused) == 2


def test_a_wrong_password_is_refused_and_the_right_one_approves(platform, alice):
    job_id = queue_send(platform).job
    r = _approve(alice, platform, job_id, password="guessed wrong", return_to="job")
    assert r.status_code == 403 and "wrong password" in r.text
    assert _job(platform, job_id).state is JobState.pending_approval
    r = _approve(alice, platform, job_id, password=PASSWORD, return_to="job")
    assert r.status_code == 303
    job = _job(platform, job_id)
    assert job.state is JobState.approved and job.decided_by == "alice"
    approved = [e for e in _events(platform, job_id) if e.event == "approved"]
    assert len(approved) == 1 and approved[0].detail.endswith("step-up: password")
    for event in _events(platform, job_id):
        assert PASSWORD not in (event.detail or "") and "guessed wrong" not in (event.detail or "")
    assert "step-up: password" in alice.get(f"/jobs/{job_id}").text


def test_wrong_step_up_passwords_are_throttled_in_their_session(platform, alice):
    job_id = queue_send(platform).job
    for _ in range(5):
        assert _approve(alice, platform, job_id, password="nope nope").status_code == 403
    r = _approve(alice, platform, job_id, password=PASSWORD, return_to="job")
    assert r.status_code == 403 and "too many wrong passwords" in r.text
    assert _job(platform, job_id).state is JobState.pending_approval


def test_deny_needs_no_step_up(platform, alice):
    job_id = queue_send(platform).job
    r = alice.post(
        f"/jobs/{job_id}/deny", data={"csrf_token": csrf(alice), "reason": "no"}, headers=ORIGIN
    )
    assert r.status_code == 303 and _job(platform, job_id).state is JobState.denied


def test_rerun_of_an_irreversible_job_asks_for_a_new_approval(platform, alice):
    job_id = queue_send(platform).job
    assert _approve(alice, platform, job_id, password=PASSWORD).status_code == 303
    r = alice.post(f"/jobs/{job_id}/rerun", data={"csrf_token": csrf(alice)}, headers=ORIGIN)
    assert r.status_code == 303
    new_id = int(r.headers["location"].split("new=")[1])
    assert _job(platform, new_id).state is JobState.pending_approval  # not approved by re-run
    assert _approve(alice, platform, new_id).status_code == 403
    assert _approve(alice, platform, new_id, password=PASSWORD).status_code == 303


def test_a_proof_for_another_call_or_operator_approves_nothing(platform):
    first, second = queue_send(platform).job, queue_send(platform, subject="other").job
    other_digest = job_step_up(platform, second, "alice")
    with pytest.raises(StepUpMismatch):
        decisions.approve(
            platform=platform,
            job_id=first,
            operator="alice",
            digest=_job(platform, first).args_digest,
            address=None,
            step_up=other_digest,
        )
    with pytest.raises(StepUpMismatch):
        decisions.approve(
            platform=platform,
            job_id=first,
            operator="bob",
            digest=_job(platform, first).args_digest,
            address=None,
            step_up=job_step_up(platform, first, "alice"),
        )
    assert _job(platform, first).state is JobState.pending_approval


def test_account_page_lists_passkeys_and_says_to_use_localhost(alice):
    page = alice.get("/account")
    assert page.status_code == 200 and "No passkeys yet" in page.text
    assert "http://localhost:8000/account" in page.text and "Add a passkey" not in page.text
    at_localhost = alice.get("/account", headers={"Host": "localhost:8000"})
    assert "Add a passkey" in at_localhost.text
    r = alice.post(
        "/account/passkeys/options", headers={**ORIGIN, "X-CSRF-Token": csrf(alice)}, json={}
    )
    assert r.status_code == 400 and "localhost" in r.json()["error"]
    r = alice.post("/account/passkeys/options", headers=ORIGIN, json={})
    assert r.status_code == 403  # the JSON endpoints need the CSRF token too


@pytest.mark.parametrize(
    ("dashboard_url", "rp_id_setting", "want"),
    [
        ("http://127.0.0.1:8000", "", "localhost"),
        ("https://aat.example.org", "", "aat.example.org"),
        ("https://AAT.example.org:8443/aat", "", "aat.example.org"),
        ("http://aat.example.org", "", "localhost"),  # plain http: no passkey but at localhost
        ("https://aat.example.org", "example.org", "example.org"),
    ],
)
def test_passkeys_are_made_for_the_https_dashboard_host_or_localhost(
    dashboard_url: str, rp_id_setting: str, want: str
) -> None:
    settings = Settings(dashboard_url=dashboard_url, passkey_rp_id=rp_id_setting)
    assert passkeys.rp_id_for(settings) == want


@pytest.mark.parametrize(
    ("origin", "rp_id", "usable"),
    [
        ("http://localhost:8000", "localhost", True),
        ("http://127.0.0.1:8000", "localhost", False),
        ("https://aat.example.org", "aat.example.org", True),
        ("https://phone.aat.example.org", "aat.example.org", True),
        ("http://aat.example.org", "aat.example.org", False),  # WebAuthn wants https
        ("https://evilaat.example.org", "aat.example.org", False),
        ("https://aat.example.org.evil.test", "aat.example.org", False),
    ],
)
def test_a_page_may_use_passkeys_only_at_or_below_their_rp_id(
    origin: str, rp_id: str, usable: bool
) -> None:
    assert passkeys.RelyingParty(origin=origin, rp_id=rp_id).usable is usable


def test_off_localhost_the_account_page_says_where_passkeys_work() -> None:
    rp = passkeys.relying_party(Settings(dashboard_url="https://aat.example.org"), "http", "x:1")
    assert rp.home == "https://aat.example.org" and not rp.usable
    with pytest.raises(passkeys.PasskeyError, match="opened at https://aat.example.org;"):
        passkeys.require_usable(rp)
