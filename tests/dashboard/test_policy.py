"""Approval policy over HTTP (SPEC §11): roles, several approvers, no self-approval, and
the agent's reason, against a real dashboard app on a real database and the real worker."""

from __future__ import annotations

from typing import Any

import pytest
from dash_helpers import ORIGIN, PASSWORD, add_operator, csrf, queue_send
from fastapi.testclient import TestClient

from webplatform.config import EXAMPLES_ROOT
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Status, answered
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Actor, Platform
from webplatform.process import runner
from webplatform.registry import RegistryLoader
from webplatform.store import operators
from webplatform.store.agents import add_agent
from webplatform.store.engine import session_scope
from webplatform.store.models import Job, JobState, Surface
from webplatform.trust.authority import seal_for
from webplatform.trust.permissions import ROLE_BOOK
from webplatform.worker import Worker


def _job(platform: Platform, job_id: int) -> Job:
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job


def _approve(client: TestClient, platform: Platform, job_id: int) -> Any:
    form = {
        "csrf_token": csrf(client),
        "password": PASSWORD,
        "digest": _job(platform, job_id).args_digest,
        "return_to": "job",
    }
    return client.post(f"/jobs/{job_id}/approve", data=form, headers=ORIGIN)


def _outbox(platform: Platform) -> list[str]:
    folder = platform.settings.home / "outbox"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _run_worker(platform: Platform) -> None:
    worker = Worker(
        platform=platform,
        settings=platform.settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        worker_id="w-policy",
    )
    while worker.run_once():
        pass


def test_the_first_operator_is_admin_then_approvers(platform: Platform) -> None:
    add_operator(platform, "ada")
    add_operator(platform, "bob")
    add_operator(platform, "vic", "viewer")
    with session_scope(platform.engine) as session:
        seal = seal_for(platform)
        roles = {o.name: o.role for o in operators.list_operators(session=session, seal=seal)}
        with pytest.raises(operators.OperatorError, match="admin, approver, viewer"):
            operators.add_operator(
                session=session,
                name="x",
                password=PASSWORD,
                roles=ROLE_BOOK.giving("boss"),
                seal=seal,
            )
    assert roles == {"ada": "admin", "bob": "approver", "vic": "viewer"}


def test_two_approvals_from_two_operators_run_the_job_once(
    platform: Platform, client_as: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform.settings, "approvals_required", 2)
    add_operator(platform, "ada")
    add_operator(platform, "bob")
    ada, bob = client_as("ada"), client_as("bob")
    answer = queue_send(platform, subject="needs two")
    assert answer.status is Status.pending_approval and answer.approvals_needed == 2
    job_id = answer.job
    assert job_id is not None

    assert "0 of 2 approvals" in ada.get("/approvals").text
    first = _approve(ada, platform, job_id)
    assert first.status_code == 303, first.text
    assert _job(platform, job_id).state is JobState.pending_approval
    page = bob.get(f"/jobs/{job_id}").text
    assert "1 of 2 approvals (approved by ada)" in page
    after_one = job_answer(platform=platform, job_id=job_id)
    assert after_one.approvals_needed == 1 and "1 more operator" in (after_one.next or "")

    # The same operator's second Approve is refused, with a message, and counts nothing.
    again = _approve(ada, platform, job_id)
    assert again.status_code == 409
    assert "you already approved job" in again.text
    assert "You approved this call" in ada.get(f"/jobs/{job_id}").text
    _run_worker(platform)
    assert _job(platform, job_id).state is JobState.pending_approval
    assert _outbox(platform) == []

    second = _approve(bob, platform, job_id)
    assert second.status_code == 303, second.text
    job = _job(platform, job_id)
    assert job.state is JobState.approved and job.decided_by == "ada, bob"
    _run_worker(platform)
    _run_worker(platform)
    assert _job(platform, job_id).state is JobState.succeeded
    assert len(_outbox(platform)) == 1
    events = [e.event for e in jobs_events(platform, job_id)]
    assert events.count("approval") == 1 and events.count("approved") == 1


def jobs_events(platform: Platform, job_id: int) -> list[Any]:
    with session_scope(platform.engine) as session:
        return jobs.audit_events(session=session, job_id=job_id)


def test_more_approvals_than_approvers_says_so_and_nothing_runs(
    platform: Platform, client_as: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform.settings, "approvals_required", 3)
    add_operator(platform, "ada")
    add_operator(platform, "bob")
    add_operator(platform, "vic", "viewer")
    ada = client_as("ada")
    job_id = queue_send(platform).job
    assert job_id is not None
    html = ada.get("/approvals").text
    assert "needs 3 approvals, but only 2 operator(s) can approve it" in html
    assert _approve(ada, platform, job_id).status_code == 303
    assert _approve(client_as("bob"), platform, job_id).status_code == 303
    _run_worker(platform)
    assert _job(platform, job_id).state is JobState.pending_approval
    assert _outbox(platform) == []


def test_a_viewer_sees_the_card_without_buttons_and_a_forged_post_is_refused(
    platform: Platform, client_as: Any
) -> None:
    add_operator(platform, "ada")
    add_operator(platform, "vic", "viewer")
    vic = client_as("vic")
    job_id = queue_send(platform, subject="viewer test").job
    assert job_id is not None
    html = vic.get("/approvals").text
    assert "viewer test" in html and "You are a viewer" in html
    assert ">Approve</button>" not in html and ">Deny</button>" not in html
    assert "Agents</a>" not in vic.get("/").text

    approve = _approve(vic, platform, job_id)
    assert approve.status_code == 403 and "viewer" in approve.text
    deny = vic.post(
        f"/jobs/{job_id}/deny", data={"csrf_token": csrf(vic), "reason": "no"}, headers=ORIGIN
    )
    assert deny.status_code == 403
    rerun = vic.post(f"/jobs/{job_id}/rerun", data={"csrf_token": csrf(vic)}, headers=ORIGIN)
    assert rerun.status_code == 403
    assert vic.get("/agents").status_code == 403
    assert _job(platform, job_id).state is JobState.pending_approval


def test_the_token_owner_cannot_approve_when_self_approval_is_off(
    platform: Platform, client_as: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform.settings, "self_approval", False)
    add_operator(platform, "ada")
    add_operator(platform, "bob")
    with session_scope(platform.engine) as session:
        add_agent(session=session, name="ada-laptop", owner="ada", seal=seal_for(platform))
    answer = answered(
        request_run,
        platform=platform,
        call=RunCall(
            kind="tool",
            name="outbox",
            action="send-message",
            args={"to": "x@example.org", "subject": "mine", "body": "b"},
        ),
        actor=Actor(surface=Surface.mcp_http, agent="ada-laptop", client="opencode"),
        consent=Consent.QUEUE,
    )
    job_id = answer.job
    assert job_id is not None
    ada = client_as("ada")
    html = ada.get(f"/jobs/{job_id}").text
    assert "You asked for this call" in html and ">Approve</button>" not in html
    refused = _approve(ada, platform, job_id)
    assert refused.status_code == 403
    assert "may not be approved by the operator who asked" in refused.text
    assert _job(platform, job_id).state is JobState.pending_approval
    assert _approve(client_as("bob"), platform, job_id).status_code == 303
    assert _job(platform, job_id).state is JobState.approved


def test_the_run_form_queues_instead_of_approving_when_self_approval_is_off(
    platform: Platform, client_as: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform.settings, "self_approval", False)
    add_operator(platform, "ada")
    add_operator(platform, "bob")
    ada = client_as("ada")
    form = {
        "csrf_token": csrf(ada),
        "arg:to": "x@example.org",
        "arg:subject": "from the form",
        "arg:body": "b",
        "confirm": "yes",
        "password": PASSWORD,
    }
    r = ada.post("/run/tool/outbox/send-message", data=form, headers=ORIGIN)
    assert r.status_code == 303, r.text
    job_id = int(r.headers["location"].rsplit("/", 1)[1])
    job = _job(platform, job_id)
    assert job.state is JobState.pending_approval and job.asked_by_operator == "ada"
    assert _approve(ada, platform, job_id).status_code == 403
    assert _approve(client_as("bob"), platform, job_id).status_code == 303
    assert _job(platform, job_id).state is JobState.approved


def test_the_run_form_counts_as_the_first_of_two(
    platform: Platform, client_as: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform.settings, "approvals_required", 2)
    add_operator(platform, "ada")
    add_operator(platform, "bob")
    ada = client_as("ada")
    form = {
        "csrf_token": csrf(ada),
        "arg:to": "x@example.org",
        "arg:subject": "two from the form",
        "arg:body": "b",
        "confirm": "yes",
        "password": PASSWORD,
    }
    r = ada.post("/run/tool/outbox/send-message", data=form, headers=ORIGIN)
    assert r.status_code == 303, r.text
    job_id = int(r.headers["location"].rsplit("/", 1)[1])
    assert "1 of 2 approvals (approved by ada)" in ada.get(f"/jobs/{job_id}").text
    assert _approve(client_as("bob"), platform, job_id).status_code == 303
    job = _job(platform, job_id)
    assert job.state is JobState.approved and job.decided_by == "ada, bob"


def test_the_agents_reason_is_shown_escaped_and_revealed(platform: Platform, alice: Any) -> None:
    reason = "<script>alert(1)</script> pay the \u202einvoice \x1b[2Jnow"
    answer = answered(
        request_run,
        platform=platform,
        call=RunCall(
            kind="tool",
            name="outbox",
            action="send-message",
            args={"to": "x@example.org", "subject": "s", "body": "b"},
            reason=reason,
        ),
        actor=Actor(surface=Surface.mcp_http, client="agent"),
        consent=Consent.QUEUE,
    )
    assert answer.job is not None
    for page in (alice.get("/approvals").text, alice.get(f"/jobs/{answer.job}").text):
        assert "&lt;script&gt;alert(1)&lt;/script&gt; pay the \\u202einvoice" in page
        assert "<script>alert(1)" not in page and "\u202e" not in page
        assert "\\u001b[2Jnow" in page and "\x1b" not in page
        assert "invisible or direction-changing characters" in page
    csv = alice.get("/jobs.csv").text
    assert "agent_reason" in csv.splitlines()[0]
    assert "pay the \\u202einvoice" in csv


def test_a_reason_too_long_is_invalid(platform: Platform) -> None:
    answer = answered(
        request_run,
        platform=platform,
        call=RunCall(
            kind="tool",
            name="outbox",
            action="send-message",
            args={"to": "x@example.org", "subject": "s", "body": "b"},
            reason="x" * 10_000,
        ),
        actor=Actor(surface=Surface.mcp_http, client="agent"),
        consent=Consent.QUEUE,
    )
    assert answer.status is Status.invalid
    assert answer.error is not None and "\n" not in answer.error
    assert "10000 characters, over the 500-character limit" in answer.error
