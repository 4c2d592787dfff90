"""Deciding several queued calls at once (SPEC §16): Approve selected with one step-up bound
to the exact set of (job id, digest) pairs, each job signed on its own digest and refused
alone when it changed, expired, was decided meanwhile or may not be approved by this
operator; Deny selected with a reason and no step-up."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from dash_helpers import ORIGIN, PASSWORD, add_operator, card_preview, csrf, queue_send
from fastapi.testclient import TestClient
from passkey_helpers import LOCAL, log_in_locally, post_json, with_passkey
from soft_authenticator import SoftAuthenticator
from sqlmodel import col, select

from webplatform.config import EXAMPLES_ROOT
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Status
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Platform
from webplatform.process import runner
from webplatform.registry import RegistryLoader
from webplatform.store.engine import session_scope
from webplatform.store.models import AuditEvent, Job, JobApproval, JobState, utcnow
from webplatform.trust import signing
from webplatform.trust.stepup import batch_digest
from webplatform.worker import Worker

HTMX = {**ORIGIN, "HX-Request": "true"}
LOCAL_HTMX = {"Origin": LOCAL, "HX-Request": "true"}


def _job(platform: Platform, job_id: int) -> Job:
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job


def _queue(platform: Platform, count: int) -> list[int]:
    ids = [queue_send(platform, subject=f"report {n}").job for n in range(count)]
    assert all(isinstance(i, int) for i in ids)
    return [i for i in ids if i is not None]


def _form(client: TestClient, platform: Platform, ids: list[int], **extra: str) -> dict[str, Any]:
    """What the page's batch form sends with the cards of `ids` ticked (and the preview each
    card shows, once it has landed)."""
    digests = {f"digest_{i}": _job(platform, i).args_digest for i in ids}
    digests |= {f"preview_{i}": card_preview(platform, i).get("preview", "") for i in ids}
    chosen = {"csrf_token": csrf(client, "/approvals"), "job": [str(i) for i in ids]}
    return chosen | digests | extra


def _approve_selected(client: TestClient, form: dict[str, Any], headers: Any = HTMX) -> Any:
    return client.post("/approvals/approve", data=form, headers=headers)


def _lines(html: str) -> list[str]:
    return re.findall(r"<li class=\"(?:ok|error)\">([^<]*)</li>", html)


def _run_worker(platform: Platform) -> None:
    worker = Worker(
        platform=platform,
        settings=platform.settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        worker_id="w-batch",
    )
    while worker.run_once():
        pass


def _outbox(platform: Platform) -> list[str]:
    folder = platform.settings.home / "outbox"
    files = sorted(folder.iterdir()) if folder.exists() else []
    return [json.loads(p.read_text())["subject"] for p in files]


def test_each_card_has_a_checkbox_that_survives_polling_and_the_page_a_batch_bar(
    platform: Platform, alice: TestClient
) -> None:
    (job_id,) = _queue(platform, 1)
    digest = _job(platform, job_id).args_digest
    for html in (alice.get("/approvals").text, alice.get("/approvals", headers=HTMX).text):
        box = re.search(rf'<input type="checkbox" name="job" value="{job_id}"[^>]*>', html)
        assert box, html[:2000]
        assert f'id="pick-{job_id}"' in box.group(0) and 'hx-preserve="true"' in box.group(0)
        assert 'form="batch"' in box.group(0)
        assert f'name="digest_{job_id}" value="{digest}"' in html
    page = alice.get("/approvals").text
    assert '<form id="batch"' in page
    assert ">Approve selected</button>" in page and ">Deny selected</button>" in page


def test_three_approved_with_one_password_each_signed_on_its_own_digest_and_run_once(
    platform: Platform, alice: TestClient
) -> None:
    ids = _queue(platform, 3)
    r = _approve_selected(alice, _form(alice, platform, ids, password=PASSWORD))
    assert r.status_code == 200, r.text
    assert _lines(r.text) == [f"job {i}: approved" for i in ids]
    assert r.headers["HX-Trigger"] == "queue-changed"
    verifier = signing.verifier_for(platform.settings)
    for job_id in ids:
        job = _job(platform, job_id)
        assert job.state is JobState.approved and job.decided_by == "alice"
        # The signed statement is the one a single approval makes: this job, its digest.
        assert verifier.problem(job) is None
        claimed = signing.decision_of(job, "approved")
        assert claimed is not None and claimed.digest == job.args_digest
    with session_scope(platform.engine, write=False) as session:
        given = session.exec(select(JobApproval).order_by(col(JobApproval.job_id))).all()
    assert [(a.job_id, a.digest) for a in given] == [
        (i, _job(platform, i).args_digest) for i in ids
    ]
    assert {a.step_up for a in given} == {"step-up: password, one for 3 calls"}
    _run_worker(platform)
    assert sorted(_outbox(platform)) == ["report 0", "report 1", "report 2"]
    for job_id in ids:
        assert job_answer(platform=platform, job_id=job_id).status is Status.succeeded


def test_no_step_up_or_a_wrong_password_approves_none_of_them(
    platform: Platform, alice: TestClient
) -> None:
    ids = _queue(platform, 2)
    none = _approve_selected(alice, _form(alice, platform, ids))
    assert none.status_code == 403 and "approving the selected calls needs" in none.text
    wrong = _approve_selected(alice, _form(alice, platform, ids, password="a guess"))
    assert wrong.status_code == 403 and "wrong password" in wrong.text
    nothing = _approve_selected(alice, _form(alice, platform, [], password=PASSWORD))
    assert nothing.status_code == 422 and "no call was selected" in nothing.text
    assert all(_job(platform, i).state is JobState.pending_approval for i in ids)


def test_an_expired_card_is_refused_alone_with_its_line(
    platform: Platform, alice: TestClient
) -> None:
    first, late, last = _queue(platform, 3)
    form = _form(alice, platform, [first, late, last], password=PASSWORD)
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=late)
        assert job is not None
        job.expires_at = utcnow() - timedelta(seconds=1)
        session.add(job)
    r = _approve_selected(alice, form)
    assert r.status_code == 200, r.text
    assert _lines(r.text) == [
        f"job {first}: approved",
        f"job {late}: expired, not approved",
        f"job {last}: approved",
    ]
    assert _job(platform, late).state is JobState.expired
    assert _job(platform, first).state is _job(platform, last).state is JobState.approved


def test_an_edited_or_changed_card_is_refused_alone(
    platform: Platform, client_as: Callable[[str], TestClient]
) -> None:
    add_operator(platform, "ada")
    add_operator(platform, "bob")
    ada, bob = client_as("ada"), client_as("bob")
    first, edited, changed = _queue(platform, 3)
    form = _form(ada, platform, [first, edited, changed], password=PASSWORD)
    # What the page showed for `changed` is not what it carries now.
    form[f"digest_{changed}"] = "0" * 64
    # Meanwhile bob edits the second call, which replaces it with a new job.
    edit = {"csrf_token": csrf(bob), "_password": PASSWORD, "to": "x@example.org"}
    edit |= {"subject": "edited", "body": "b"}
    assert bob.post(f"/jobs/{edited}/edit", data=edit, headers=ORIGIN).status_code == 303
    r = _approve_selected(ada, form)
    assert r.status_code == 200, r.text
    with session_scope(platform.engine, write=False) as session:
        into = session.exec(select(Job.id).where(col(Job.edited_from) == edited)).one()
    assert _lines(r.text) == [
        f"job {first}: approved",
        f"job {edited}: edited by bob into job {into}, not decided: review that one",
        f"job {changed}: changed since the page showed it, not decided: review it again",
    ]
    assert _job(platform, first).state is JobState.approved
    assert _job(platform, edited).state is JobState.denied
    assert _job(platform, changed).state is JobState.pending_approval


@pytest.fixture
def local(platform: Platform, app: Any) -> Iterator[TestClient]:
    """Alice, logged in at http://localhost:8000 (where passkeys work), with a passkey."""
    add_operator(platform, "alice")
    with TestClient(app, base_url=LOCAL, follow_redirects=False) as client:
        log_in_locally(client, "alice")
        yield client


def _batch_assertion(
    client: TestClient, soft: SoftAuthenticator, platform: Platform, ids: list[int]
) -> str:
    pairs = [[i, _job(platform, i).args_digest] for i in ids]
    options = post_json(client, "/stepup/options", {"purpose": "approve-batch", "jobs": pairs})
    assert options.status_code == 200, options.text
    return json.dumps(soft.assert_for(options.json()))


def test_one_passkey_touch_approves_exactly_the_set_it_was_made_for(
    platform: Platform, local: TestClient
) -> None:
    soft = with_passkey(local)
    one, two, three = _queue(platform, 3)
    # A confirmation made for jobs one and two, sent to approve all three: refused, and
    # nothing is approved (it could not be replayed for another set either: single-use).
    for_two = _batch_assertion(local, soft, platform, [one, two])
    r = _approve_selected(
        local, _form(local, platform, [one, two, three], passkey=for_two), LOCAL_HTMX
    )
    assert r.status_code == 403 and "made for another call" in r.text
    # A confirmation for approving job one alone approves no set containing it.
    single = post_json(
        local,
        "/stepup/options",
        {"purpose": "approve", "digest": _job(platform, one).args_digest, "job_id": one},
    )
    alone = json.dumps(soft.assert_for(single.json()))
    r = _approve_selected(local, _form(local, platform, [one], passkey=alone), LOCAL_HTMX)
    assert r.status_code == 403 and "made for another call" in r.text
    assert all(_job(platform, i).state is JobState.pending_approval for i in (one, two, three))

    for_all = _batch_assertion(local, soft, platform, [three, one, two])
    form = _form(local, platform, [one, two, three], passkey=for_all)
    r = _approve_selected(local, form, LOCAL_HTMX)
    assert r.status_code == 200, r.text
    assert _lines(r.text) == [f"job {i}: approved" for i in (one, two, three)]
    with session_scope(platform.engine, write=False) as session:
        steps = {a.step_up for a in session.exec(select(JobApproval)).all()}
    assert len(steps) == 1 and re.fullmatch(r"step-up: passkey \d+, one for 3 calls", steps.pop())
    # The same confirmation again: its challenge is spent.
    again = _approve_selected(local, form, LOCAL_HTMX)
    assert again.status_code == 403 and "already used" in again.text


def test_deny_selected_with_a_reason_needs_no_step_up(
    platform: Platform, alice: TestClient
) -> None:
    ids = _queue(platform, 2)
    r = alice.post(
        "/approvals/deny", data=_form(alice, platform, ids, reason="not today"), headers=HTMX
    )
    assert r.status_code == 200, r.text
    assert _lines(r.text) == [f"job {i}: denied" for i in ids]
    for job_id in ids:
        job = _job(platform, job_id)
        assert job.state is JobState.denied and job.reason == "not today"
        assert signing.verifier_for(platform.settings).problem(job, "denied") is None
        answer = job_answer(platform=platform, job_id=job_id)
        assert answer.status is Status.denied and answer.reason == "not today"
    again = alice.post("/approvals/deny", data=_form(alice, platform, ids), headers=HTMX)
    assert again.status_code == 409
    assert _lines(again.text) == [f"job {i}: already denied by alice, not decided" for i in ids]


def test_self_approval_is_refused_for_that_job_alone(
    platform: Platform,
    client_as: Callable[[str], TestClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(platform.settings, "self_approval", False)
    add_operator(platform, "ada")
    ada = client_as("ada")
    run = {"csrf_token": csrf(ada), "arg:to": "x@example.org", "arg:subject": "mine"}
    run |= {"arg:body": "b", "confirm": "yes", "password": PASSWORD}
    asked = ada.post("/run/tool/outbox/send-message", data=run, headers=ORIGIN)
    assert asked.status_code == 303, asked.text
    own = int(asked.headers["location"].rsplit("/", 1)[1])
    other = queue_send(platform).job
    assert other is not None
    r = _approve_selected(ada, _form(ada, platform, [own, other], password=PASSWORD))
    assert r.status_code == 200, r.text
    lines = _lines(r.text)
    assert lines[1] == f"job {other}: approved"
    assert lines[0].startswith(f"job {own}: not decided: you asked for job {own}")
    assert _job(platform, own).state is JobState.pending_approval
    assert _job(platform, other).state is JobState.approved


def test_a_batch_counts_as_this_operators_one_approval_of_each(
    platform: Platform,
    client_as: Callable[[str], TestClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(platform.settings, "approvals_required", 2)
    add_operator(platform, "ada")
    add_operator(platform, "bob")
    ada, bob = client_as("ada"), client_as("bob")
    ids = _queue(platform, 2)
    first = _approve_selected(ada, _form(ada, platform, ids, password=PASSWORD))
    assert _lines(first.text) == [
        f"job {i}: your approval is recorded; it waits for more approvals" for i in ids
    ]
    again = _approve_selected(ada, _form(ada, platform, ids, password=PASSWORD))
    assert again.status_code == 409
    assert all("you already approved" in line for line in _lines(again.text))
    assert all(_job(platform, i).state is JobState.pending_approval for i in ids)
    done = _approve_selected(bob, _form(bob, platform, ids, password=PASSWORD))
    assert _lines(done.text) == [f"job {i}: approved" for i in ids]
    for job_id in ids:
        job = _job(platform, job_id)
        assert job.decided_by == "ada, bob"
        assert signing.verifier_for(platform.settings).problem(job) is None
    with session_scope(platform.engine, write=False) as session:
        refused = session.exec(
            select(AuditEvent).where(col(AuditEvent.event) == "step-up-refused")
        ).all()
    assert refused == []


def test_a_viewer_gets_no_boxes_and_a_forged_batch_decides_nothing(
    platform: Platform, client_as: Callable[[str], TestClient]
) -> None:
    add_operator(platform, "vic", "viewer")
    vic = client_as("vic")
    ids = _queue(platform, 2)
    page = vic.get("/approvals").text
    assert 'name="job"' not in page and '<form id="batch"' not in page
    form = _form(vic, platform, ids, password=PASSWORD, reason="no")
    assert vic.post("/approvals/approve", data=form, headers=HTMX).status_code == 403
    assert vic.post("/approvals/deny", data=form, headers=HTMX).status_code == 403
    assert all(_job(platform, i).state is JobState.pending_approval for i in ids)


def test_the_batch_digest_names_the_operator_and_the_set_in_any_order() -> None:
    pairs = [(3, "c" * 64), (1, "a" * 64)]
    digest = batch_digest(operator="ada", chosen=pairs)
    assert digest == batch_digest(operator="ada", chosen=list(reversed(pairs)))
    assert digest != batch_digest(operator="bob", chosen=pairs)
    assert digest != batch_digest(operator="ada", chosen=pairs[:1])
    assert digest != batch_digest(operator="ada", chosen=[(3, "c" * 64), (1, "b" * 64)])
