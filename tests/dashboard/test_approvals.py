"""Deciding on queued calls: the queue page, approve, deny, races, expiry, unknown jobs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from dash_helpers import ORIGIN, PASSWORD, add_operator, csrf, log_in, queue_send
from fastapi.testclient import TestClient

from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Actor
from webplatform.store.engine import session_scope
from webplatform.store.models import Surface, utcnow


def _job(platform, job_id):
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job


def _approve(client, platform, job_id, **extra):
    form = {
        "csrf_token": csrf(client),
        "password": PASSWORD,
        "digest": _job(platform, job_id).args_digest,
        "return_to": "approvals",
        **extra,
    }
    return client.post(f"/jobs/{job_id}/approve", data=form, headers=ORIGIN)


def test_queue_card_shows_the_call(platform, alice):
    answer = queue_send(platform, subject="quarterly report")
    job = _job(platform, answer.job)
    html = alice.get("/approvals").text
    assert f'data-job-id="{job.id}"' in html
    assert "outbox send-message" in html and "quarterly report" in html
    assert job.args_digest in html and "test-agent" in html
    assert ">Approve</button>" in html and ">Deny</button>" in html
    assert 'name="reason"' in html
    assert "<title>(1) Approvals" in html
    # What the tool may reach on the network (SPEC §17): the outbox, nothing.
    assert '<dt>network</dt><dd><code class="network">none</code></dd>' in html


def test_pending_count_in_every_title(platform, alice):
    queue_send(platform)
    queue_send(platform)
    assert "<title>(2) Overview" in alice.get("/").text
    assert "<title>(2) Jobs" in alice.get("/jobs").text


def test_htmx_poll_gets_only_the_live_block(platform, alice):
    queue_send(platform)
    r = alice.get("/approvals", headers={"HX-Request": "true"})
    assert r.headers["vary"] == "HX-Request"
    assert r.text.lstrip().startswith('<section id="approvals-live"')
    assert "<html" not in r.text


def test_approve_then_the_double_submit_says_who_decided(platform, alice):
    job_id = queue_send(platform).job
    r = _approve(alice, platform, job_id)
    assert (
        r.status_code == 303 and r.headers["location"] == f"/approvals?done=approved&job={job_id}"
    )
    assert f"Approved job {job_id}." in alice.get(r.headers["location"]).text
    job = _job(platform, job_id)
    assert job.state.value == "approved" and job.decided_by == "alice"
    again = _approve(alice, platform, job_id)
    assert again.status_code == 409
    assert "already approved by alice" in again.text


def test_two_operators_one_wins_the_other_is_told(app, platform, alice):
    add_operator(platform, "bob")
    with TestClient(app, base_url="http://127.0.0.1:8000", follow_redirects=False) as bob:
        log_in(bob, "bob")
        job_id = queue_send(platform).job
        bob_form = {
            "csrf_token": csrf(bob),
            "password": PASSWORD,
            "digest": _job(platform, job_id).args_digest,
        }
        assert _approve(alice, platform, job_id).status_code == 303
        r = bob.post(
            f"/jobs/{job_id}/approve", data={**bob_form, "return_to": "job"}, headers=ORIGIN
        )
        assert r.status_code == 409
        assert "already approved by alice" in r.text
        assert f"Job {job_id}" in r.text  # the job page, with the message on it


def test_htmx_decision_returns_the_notice_and_refreshes_the_queue(platform, alice):
    job_id = queue_send(platform).job
    r = alice.post(
        f"/jobs/{job_id}/approve",
        data={
            "csrf_token": csrf(alice),
            "password": PASSWORD,
            "digest": _job(platform, job_id).args_digest,
            "return_to": "approvals",
        },
        headers={**ORIGIN, "HX-Request": "true"},
    )
    assert r.status_code == 200 and f"Approved job {job_id}." in r.text
    assert r.headers["hx-trigger"] == "queue-changed"
    again = alice.post(
        f"/jobs/{job_id}/approve",
        data={
            "csrf_token": csrf(alice),
            "password": PASSWORD,
            "digest": _job(platform, job_id).args_digest,
        },
        headers={**ORIGIN, "HX-Request": "true"},
    )
    # The refusal tells htmx the truth too; base.html's responseHandling swaps it in.
    assert again.status_code == 409 and "already approved by alice" in again.text
    assert "<html" not in again.text and 'role="alert"' in again.text


@pytest.mark.parametrize("htmx", [False, True], ids=["form", "htmx"])
def test_every_refused_decision_answers_its_true_status(platform, alice, htmx):
    extra = {"HX-Request": "true"} if htmx else {}

    def post(job_id, verb, **form):
        data = {"csrf_token": csrf(alice), "return_to": "approvals", **form}
        return alice.post(f"/jobs/{job_id}/{verb}", data=data, headers={**ORIGIN, **extra})

    def check(r, status, words):
        assert r.status_code == status and words in r.text, (r.status_code, r.text[:300])
        # htmx gets the notice block alone, a plain form post the whole page around it.
        assert ("<html" in r.text) is not htmx

    decided = queue_send(platform).job
    assert post(decided, "deny").status_code == (200 if htmx else 303)
    check(post(decided, "deny"), 409, "already denied by alice")
    digest = _job(platform, decided).args_digest
    check(
        post(decided, "approve", digest=digest, password=PASSWORD), 409, "already denied by alice"
    )

    pending = queue_send(platform).job
    check(post(pending, "approve", digest="0" * 64, password=PASSWORD), 409, "review them again")
    check(post(pending, "approve"), 422, "no digest")
    assert _job(platform, pending).state.value == "pending_approval"

    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=pending)
        assert job is not None
        job.expires_at = utcnow() - timedelta(seconds=1)
        session.add(job)
    check(post(pending, "approve", digest=digest, password=PASSWORD), 409, "expired")

    forged = alice.post(
        f"/jobs/{queue_send(platform).job}/deny",
        data={"csrf_token": "f" * 64},
        headers={**ORIGIN, **extra},
    )
    assert forged.status_code == 403 and "CSRF" in forged.text


def test_deny_with_a_reason_reaches_the_agent(platform, alice):
    job_id = queue_send(platform).job
    r = alice.post(
        f"/jobs/{job_id}/deny",
        headers=ORIGIN,
        data={
            "csrf_token": csrf(alice),
            "reason": "not to customers on Friday",
            "return_to": "job",
        },
    )
    assert r.status_code == 303
    answer = job_answer(platform=platform, job_id=job_id)
    assert answer.status is Status.denied
    assert answer.reason == "not to customers on Friday" and answer.decided_by == "alice"
    history = alice.get("/approvals").text
    assert "not to customers on Friday" in history and "denied" in history


def test_approve_after_expiry_is_a_clear_refusal(settings, platform, alice):
    job_id = queue_send(platform).job
    page_digest = _job(platform, job_id).args_digest
    token = csrf(alice)
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        job.expires_at = utcnow() - timedelta(seconds=1)
        session.add(job)
    r = alice.post(
        f"/jobs/{job_id}/approve",
        headers=ORIGIN,
        data={"csrf_token": token, "password": PASSWORD, "digest": page_digest, "return_to": "job"},
    )
    assert r.status_code == 409
    assert "expired" in r.text and "will not run" in r.text
    assert _job(platform, job_id).state.value == "expired"
    assert "expired" in alice.get("/approvals").text  # stays visible in history


def test_approve_with_another_digest_is_refused(platform, alice):
    job_id = queue_send(platform).job
    r = alice.post(
        f"/jobs/{job_id}/approve",
        headers=ORIGIN,
        data={
            "csrf_token": csrf(alice),
            "password": PASSWORD,
            "digest": "0" * 64,
            "return_to": "job",
        },
    )
    assert r.status_code == 409 and "review them again" in r.text
    assert _job(platform, job_id).state.value == "pending_approval"


def test_unknown_job_is_a_404_page(alice):
    r = alice.get("/jobs/999999")
    assert r.status_code == 404 and "no job 999999" in r.text and "<html" in r.text
    r = alice.post(
        "/jobs/999999/approve",
        headers=ORIGIN,
        data={"csrf_token": csrf(alice), "password": PASSWORD, "digest": "x"},
    )
    assert r.status_code == 404
    assert alice.get("/jobs/not-a-number").status_code == 400


def test_job_page_of_a_pending_job_has_the_decision_form(platform, alice):
    job_id = queue_send(platform).job
    html = alice.get(f"/jobs/{job_id}").text
    assert ">Approve</button>" in html and ">Deny</button>" in html
    assert _job(platform, job_id).args_digest in html
    assert "created" in html  # the timeline's first event


def _live(client, query=""):
    return client.get(f"/approvals{query}", headers={"HX-Request": "true"})


def test_the_page_states_the_true_count_and_reaches_every_card(platform, alice):
    # 6 junk agents fill their share of the queue (20 each), then the real request comes.
    for agent in range(6):
        for i in range(20):
            queue_send(platform, client=f"junk-{agent}", subject=f"junk {agent}.{i}")
    real = queue_send(platform, client="real-agent", subject="the real one").job
    html = alice.get("/approvals").text
    assert "Waiting: 121" in html and 'data-pending-count="121"' in html
    assert f'data-job-id="{real}"' not in html  # page 1 holds the 50 oldest
    assert "Showing 1–50 of 121" in html and 'rel="next"' in html
    newest = alice.get("/approvals?order=newest").text
    assert f'data-job-id="{real}"' in newest and "the real one" in newest
    last = alice.get("/approvals?page=3").text
    assert f'data-job-id="{real}"' in last and "Showing 101–121 of 121" in last
    # The polled block keeps the page and order the operator chose.
    assert 'hx-get="/approvals?page=3&amp;order=oldest"' in last
    assert f'data-job-id="{real}"' in _live(alice, "?page=3&order=oldest").text


def test_the_live_refresh_stays_small_however_large_the_arguments(platform, alice):
    body = "y" * (250 * 1024)  # just under AAT_MAX_ARGS_BYTES
    ids = [queue_send(platform, subject=f"big {i}", body=body).job for i in range(8)]
    live = _live(alice)
    assert len(live.content) < 100_000, f"each refresh is {len(live.content)} bytes"
    assert all(f'data-job-id="{i}"' in live.text for i in ids)
    assert f'href="/jobs/{ids[0]}">Review all of them and decide on the job page' in live.text
    # The job page still shows every argument in full.
    assert body in alice.get(f"/jobs/{ids[0]}").text


def test_invisible_characters_are_shown_escaped_with_a_warning(platform, alice):
    sneaky = "\u202ekcatta@live.example"  # reads as elpmaxe.evil@attack
    job = queue_send(platform, subject=sneaky, body="a\u200bb\u2028c").job
    for page in (alice.get("/approvals").text, alice.get(f"/jobs/{job}").text):
        assert "\\u202ekcatta@live.example" in page
        assert "a\\u200bb\\u2028c" in page
        assert "\u202e" not in page and "\u200b" not in page and "\u2028" not in page
        assert "invisible or direction-changing characters" in page
    plain = queue_send(platform, client="other", subject="plain").job
    card = alice.get("/approvals").text.split(f'id="card-{plain}"')[1].split("</article>")[0]
    assert "invisible or direction-changing" not in card


def test_invisible_characters_in_a_result_are_shown_escaped(platform, alice):
    answer = request_run(
        platform=platform,
        call=RunCall(
            kind="tool", name="hello-world", action="greet", args={"name": "\u2067Bob\u2069"}
        ),
        actor=Actor(surface=Surface.mcp_stdio, client="test-agent"),
        consent=Consent.NONE,
    )
    page = alice.get(f"/jobs/{answer.job}").text
    assert "Hello, \\u2067Bob\\u2069!" in page and "\u2067" not in page
    assert "invisible or direction-changing characters" in page
