"""Edit, then approve (SPEC §11) over HTTP against a real dashboard app, a real database
(SQLite and PostgreSQL) and the real worker running the example outbox tool."""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from dash_helpers import BASE, ORIGIN, PASSWORD, add_operator, csrf, log_in, queue_send
from fastapi.testclient import TestClient
from sqlmodel import col, select
from stepup_helpers import job_step_up

from dashboard.app import create_app
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import decisions, edits
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Actor, Platform
from webplatform.process import runner
from webplatform.registry import RegistryLoader
from webplatform.store.agents import add_agent
from webplatform.store.engine import session_scope
from webplatform.store.models import Job, JobState, Surface, utcnow
from webplatform.trust.authority import seal_for
from webplatform.trust.stepup import StepUp, StepUpMethod
from webplatform.worker import Worker

EDITED = {"to": "carol@example.org", "subject": "edited subject", "body": "edited body"}


def _all_jobs(platform: Platform) -> list[Job]:
    with session_scope(platform.engine, write=False) as session:
        return list(session.exec(select(Job).order_by(col(Job.id))).all())


def _job(platform: Platform, job_id: int) -> Job:
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job


def _edit(client: TestClient, job_id: int, **fields: str) -> Any:
    form = {"csrf_token": csrf(client), "_password": PASSWORD, **fields}
    return client.post(f"/jobs/{job_id}/edit", data=form, headers=ORIGIN)


def _run_worker(platform: Platform) -> None:
    worker = Worker(
        platform=platform,
        settings=platform.settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        worker_id="w-edit",
    )
    while worker.run_once():
        pass


def _outbox(platform: Platform) -> list[dict[str, Any]]:
    folder = platform.settings.home / "outbox"
    files = sorted(folder.iterdir()) if folder.exists() else []
    return [json.loads(p.read_text()) for p in files]


def test_edit_then_approve_runs_the_edited_call_once_and_the_agent_gets_it(
    platform: Platform, client_as: Callable[[str], TestClient]
) -> None:
    add_operator(platform, "ada")
    ada = client_as("ada")
    original = queue_send(platform, subject="original subject").job
    assert original is not None
    card = ada.get("/approvals").text
    assert f'action="/jobs/{original}/edit"' in card and ">Edit</button>" in card

    form = ada.get(f"/jobs/{original}/edit").text
    for name, value in (("to", "bob@example.org"), ("subject", "original subject")):
        assert re.search(rf'name="{name}" value="{re.escape(value)}"', form), name
    assert ">Approve edited</button>" in form

    done = _edit(ada, original, **EDITED)
    assert done.status_code == 303, done.text
    edited = int(done.headers["location"].split("/jobs/")[1].split("?")[0])
    assert edited != original
    old, new = _job(platform, original), _job(platform, edited)
    assert old.state is JobState.denied and old.reason == "edited by ada"
    assert new.state is JobState.approved and new.edited_from == original
    assert json.loads(new.args_json) == {**EDITED, "delay-s": 0}  # its default, as it runs
    assert new.requested_by == old.requested_by and new.surface == old.surface

    # The agent asked about the original: it is told about the edited job.
    waiting = job_answer(platform=platform, job_id=original)
    assert waiting.status is Status.approved and waiting.job == edited
    _run_worker(platform)
    outcome = job_answer(platform=platform, job_id=original)
    assert outcome.status is Status.succeeded and outcome.edited_from == original
    assert outcome.args == {**EDITED, "delay-s": 0}
    sent = _outbox(platform)
    assert [(m["to"], m["subject"], m["body"]) for m in sent] == [tuple(EDITED.values())]

    # Both job pages link to each other, and both audit trails say who edited.
    new_page = ada.get(f"/jobs/{edited}").text
    old_page = ada.get(f"/jobs/{original}").text
    assert f'class="edited-from" href="/jobs/{original}"' in new_page
    assert f'class="edited-into" href="/jobs/{edited}"' in old_page
    assert "edited by ada" in old_page and f"edited into job {edited}" in old_page
    assert f"edited from job {original}" in new_page


def test_an_edit_that_fails_validation_shows_the_error_and_changes_nothing(
    platform: Platform, client_as: Callable[[str], TestClient]
) -> None:
    add_operator(platform, "ada")
    ada = client_as("ada")
    original = queue_send(platform).job
    assert original is not None
    bad = _edit(ada, original, to="x@example.org", subject="s", body="b", **{"delay-s": "soon"})
    assert bad.status_code == 400
    assert "delay-s" in bad.text and 'class="notice error"' in bad.text
    # The form comes back with what was typed, ready to fix.
    assert 'name="delay-s" inputmode="decimal" value="soon"' in bad.text
    missing = _edit(ada, original, to="x@example.org", subject="", body="b")
    assert missing.status_code == 400
    assert "missing required argument 'subject'" in html.unescape(missing.text)
    assert [j.id for j in _all_jobs(platform)] == [original]
    assert _job(platform, original).state is JobState.pending_approval


def test_a_wrong_password_or_a_decided_job_edits_nothing(
    platform: Platform, client_as: Callable[[str], TestClient]
) -> None:
    add_operator(platform, "ada")
    ada = client_as("ada")
    original = queue_send(platform).job
    assert original is not None
    form = {"csrf_token": csrf(ada), "_password": "wrong", **EDITED}
    wrong = ada.post(f"/jobs/{original}/edit", data=form, headers=ORIGIN)
    assert wrong.status_code == 403 and "wrong password" in wrong.text
    assert [j.id for j in _all_jobs(platform)] == [original]

    decisions.deny(platform=platform, job_id=original, operator="ada", reason="no", address=None)
    late = _edit(ada, original, **EDITED)
    assert late.status_code == 409 and "no longer pending" in late.text
    htmx = {**ORIGIN, "HX-Request": "true"}
    form = {"csrf_token": csrf(ada), "_password": PASSWORD, **EDITED}
    late_htmx = ada.post(f"/jobs/{original}/edit", data=form, headers=htmx)
    assert late_htmx.status_code == 409 and "no longer pending" in late_htmx.text
    assert [j.id for j in _all_jobs(platform)] == [original]


def test_an_edit_after_expiry_is_refused_and_the_expiry_is_recorded_as_for_approve(
    platform: Platform,
) -> None:
    add_operator(platform, "ada")
    original = queue_send(platform).job
    assert original is not None
    edit = edits.prepare(platform=platform, job_id=original, args=EDITED)
    assert not isinstance(edit, Answer), edit
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=original)
        assert job is not None
        job.expires_at = utcnow() - timedelta(seconds=1)
        session.add(job)
    step_up = StepUp(operator="ada", digest=edit.digest, method=StepUpMethod.password)
    with pytest.raises(jobs.ApprovalExpired):
        edits.approve_edited(
            platform=platform, edit=edit, operator="ada", address=None, step_up=step_up
        )
    # The refusal sticks, as an Approve's does: the job is expired, and nothing was created.
    assert [(j.id, j.state) for j in _all_jobs(platform)] == [(original, JobState.expired)]


def test_forged_edits_by_a_viewer_and_by_the_asker_are_refused(
    platform: Platform, client_as: Callable[[str], TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform.settings, "self_approval", False)
    add_operator(platform, "ada")
    add_operator(platform, "vic", "viewer")
    with session_scope(platform.engine) as session:
        add_agent(session=session, name="ada-laptop", owner="ada", seal=seal_for(platform))
    answer = request_run(
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
    original = answer.job
    assert original is not None
    vic, ada = client_as("vic"), client_as("ada")
    assert ">Edit</button>" not in vic.get("/approvals").text
    assert ">Edit</button>" not in ada.get(f"/jobs/{original}").text

    by_viewer = _edit(vic, original, **EDITED)
    assert by_viewer.status_code == 403 and "viewer" in by_viewer.text
    by_asker = _edit(ada, original, **EDITED)
    assert by_asker.status_code == 403
    assert "may not be approved by the operator who asked" in by_asker.text
    assert [j.id for j in _all_jobs(platform)] == [original]
    assert _job(platform, original).state is JobState.pending_approval


def test_the_editors_approval_counts_as_one_of_two(
    platform: Platform, client_as: Callable[[str], TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform.settings, "approvals_required", 2)
    add_operator(platform, "ada")
    add_operator(platform, "bob")
    ada = client_as("ada")
    original = queue_send(platform).job
    assert original is not None
    done = _edit(ada, original, **EDITED)
    assert done.status_code == 303 and "done=edited-partial" in done.headers["location"]
    (edited,) = [j for j in _all_jobs(platform) if j.edited_from == original]
    assert edited.id is not None and edited.state is JobState.pending_approval
    assert "1 of 2 approvals (approved by ada)" in ada.get(f"/jobs/{edited.id}").text
    pending = job_answer(platform=platform, job_id=original)
    assert pending.status is Status.pending_approval and pending.job == edited.id
    assert pending.approvals_needed == 1 and pending.edited_from == original

    bob = client_as("bob")
    form = {
        "csrf_token": csrf(bob),
        "password": PASSWORD,
        "digest": edited.args_digest,
        "return_to": "job",
    }
    assert bob.post(f"/jobs/{edited.id}/approve", data=form, headers=ORIGIN).status_code == 303
    assert _job(platform, edited.id).state is JobState.approved
    assert _job(platform, edited.id).decided_by == "ada, bob"


def _race_once(platform: Platform, original: int) -> tuple[list[str], list[Exception]]:
    """An Approve of the original and an edit of it, started together; what each did."""
    edit = edits.prepare(platform=platform, job_id=original, args=EDITED)
    won: list[str] = []
    lost: list[Exception] = []
    start = threading.Barrier(2)

    def approve() -> None:
        step_up = job_step_up(platform, original, "ada")
        start.wait()
        try:
            decisions.approve(
                platform=platform,
                job_id=original,
                operator="ada",
                digest=step_up.digest,
                address=None,
                step_up=step_up,
            )
            won.append("approve")
        except jobs.StaleState as exc:
            lost.append(exc)

    def edit_it() -> None:
        step_up = StepUp(operator="bob", digest=edit.digest, method=StepUpMethod.password)
        start.wait()
        try:
            edits.approve_edited(
                platform=platform, edit=edit, operator="bob", address=None, step_up=step_up
            )
            won.append("edit")
        except jobs.StaleState as exc:
            lost.append(exc)

    threads = [threading.Thread(target=approve), threading.Thread(target=edit_it)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won, lost


def test_an_edit_racing_an_approve_of_the_original_has_one_winner(platform: Platform) -> None:
    add_operator(platform, "ada")
    add_operator(platform, "bob")
    winners = []
    for round_ in range(6):
        original = queue_send(platform, subject=f"round {round_}").job
        assert original is not None
        won, lost = _race_once(platform, original)
        assert len(won) == 1 and len(lost) == 1, (won, lost)
        winners.append(won[0])
        old = _job(platform, original)
        successors = [j for j in _all_jobs(platform) if j.edited_from == original]
        if won == ["approve"]:
            assert old.state is JobState.approved and successors == []
        else:
            assert old.state is JobState.denied and len(successors) == 1
            assert successors[0].state is JobState.approved
    _run_worker(platform)
    sent = _outbox(platform)
    # One message per round, never two: the winner's arguments.
    assert len(sent) == 6
    assert sum(m["subject"] == EDITED["subject"] for m in sent) == winners.count("edit")


CLASH_TOOL = """\
name: clash
description: Test fixture - an irreversible action whose arguments share the edit form's names.
version: 0.1.0
runtime: python
entrypoint: main.py
actions:
  - name: log-in
    description: Needs an operator's approval.
    reversible: false
    args:
      - {name: user, type: string, required: true}
      - {name: password, type: string, required: true}
      - {name: csrf_token, type: string, required: true}
"""


def _form_inputs(page: str) -> list[tuple[str, str, str]]:
    """The edit form's inputs in document order: (id, name, value)."""
    form = page.split('class="stack edit-form"', 1)[1].split("</form>", 1)[0]
    found = []
    for tag in re.findall(r"<input\b[^>]*>", form):
        attrs = dict(re.findall(r'(\w[\w-]*)="([^"]*)"', tag))
        found.append((attrs.get("id", ""), attrs["name"], html.unescape(attrs.get("value", ""))))
    return found


def test_arguments_named_password_and_csrf_token_keep_their_own_values(
    settings: Settings, tmp_path: Path
) -> None:
    # A registry beside the workspace (tmp_path), not inside it.
    registry = tmp_path.parent / f"{tmp_path.name}-registry"
    tool = registry / "tools" / "clash"
    tool.mkdir(parents=True)
    (tool / "tool.yaml").write_text(CLASH_TOOL)
    (tool / "main.py").write_text("print('{}')\n")
    platform = Platform(settings.model_copy(update={"registry": str(registry)}))
    add_operator(platform, "ada")
    asked = {"user": "u", "password": "old-service-pass", "csrf_token": "old-value"}
    answer = request_run(
        platform=platform,
        call=RunCall(kind="tool", name="clash", action="log-in", args=asked),
        actor=Actor(surface=Surface.mcp_http, client="test-agent"),
        consent=Consent.QUEUE,
    )
    original = answer.job
    assert original is not None and answer.status is Status.pending_approval, answer
    app = create_app(platform.settings, platform=platform, embed_worker=False, mcp=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as ada:
        log_in(ada, "ada")
        page = ada.get(f"/jobs/{original}/edit").text
        typed = {"password": "new-service-pass", "csrf_token": "new-value"}
        # What a browser submits: every input in document order, as the operator filled it.
        sent = []
        for ident, name, value in _form_inputs(page):
            if ident == f"edit-password-{original}":
                value = PASSWORD
            elif ident.startswith("arg-"):
                arg = re.search(rf'<label for="{ident}"><code>([^<]+)</code>', page)
                assert arg is not None
                value = typed.get(arg.group(1), value)
            sent.append((name, value))
        done = ada.post(
            f"/jobs/{original}/edit",
            content=urlencode(sent).encode(),
            headers={**ORIGIN, "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert done.status_code == 303, done.text
    (edited,) = [j for j in _all_jobs(platform) if j.edited_from == original]
    assert json.loads(edited.args_json) == {"user": "u", **typed}
    # The operator's own password never becomes an argument, nor reaches the database.
    with platform.engine.connect() as conn:
        stored = repr(conn.exec_driver_sql("SELECT * FROM job").all())
    assert PASSWORD not in stored
    platform.engine.dispose()
