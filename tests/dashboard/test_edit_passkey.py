"""The edit-then-approve form takes a passkey as well as the password (SPEC §16): the
challenge is bound to the edited call's digest, which the server computes from the form, so
a confirmation made for one edit approves no other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from dash_helpers import PASSWORD, add_operator, csrf, queue_send
from fastapi.testclient import TestClient
from passkey_helpers import LOCAL, LOCAL_ORIGIN, log_in_locally, with_passkey
from sqlmodel import col, select

from webplatform.platform import Platform
from webplatform.store.engine import session_scope
from webplatform.store.models import Job, JobApproval, JobState

EDITED = {"to": "carol@example.org", "subject": "edited subject", "body": "edited body"}


@pytest.fixture
def local(platform: Platform, app: Any) -> Iterator[TestClient]:
    """Alice, logged in at http://localhost:8000 (where passkeys work)."""
    add_operator(platform, "alice")
    with TestClient(app, base_url=LOCAL, follow_redirects=False) as client:
        log_in_locally(client, "alice")
        yield client


def _jobs(platform: Platform) -> list[Job]:
    with session_scope(platform.engine, write=False) as session:
        return list(session.exec(select(Job).order_by(col(Job.id))).all())


def _options(client: TestClient, job_id: int, values: dict[str, str]) -> Any:
    """What static/passkeys.js asks first: the form, posted to the edit's step-up URL."""
    form = {"csrf_token": csrf(client, f"/jobs/{job_id}/edit"), "_password": "", **values}
    return client.post(f"/jobs/{job_id}/edit/stepup", data=form, headers=LOCAL_ORIGIN)


def _submit(client: TestClient, job_id: int, values: dict[str, str], passkey: str) -> Any:
    form = {"csrf_token": csrf(client, f"/jobs/{job_id}/edit"), "_passkey": passkey, **values}
    return client.post(f"/jobs/{job_id}/edit", data=form, headers=LOCAL_ORIGIN)


def test_the_edit_form_offers_the_passkey_and_leaves_the_password_optional(
    platform: Platform, local: TestClient
) -> None:
    job_id = queue_send(platform).job
    before = local.get(f"/jobs/{job_id}/edit").text
    assert 'data-passkey="no"' in before and 'autocomplete="current-password" required' in before
    with_passkey(local)
    page = local.get(f"/jobs/{job_id}/edit").text
    assert f'data-stepup-url="/jobs/{job_id}/edit/stepup"' in page
    assert 'data-passkey="yes"' in page and 'name="_passkey"' in page
    assert 'autocomplete="current-password" required' not in page


def test_a_passkey_approves_the_edit_it_was_made_for_and_no_other(
    platform: Platform, local: TestClient
) -> None:
    soft = with_passkey(local)
    original = queue_send(platform, subject="original").job
    assert original is not None
    # A confirmation made for one edit, sent with other values: refused, nothing changes.
    other = {**EDITED, "subject": "something else"}
    made_for_other = json.dumps(soft.assert_for(_options(local, original, other).json()))
    refused = _submit(local, original, EDITED, made_for_other)
    assert refused.status_code == 403 and "made for another call" in refused.text
    assert [j.state for j in _jobs(platform)] == [JobState.pending_approval]
    # Invalid values get no challenge at all.
    bad = _options(local, original, {**EDITED, "to": ""})
    assert bad.status_code == 400 and "error" in bad.json()

    assertion = json.dumps(soft.assert_for(_options(local, original, EDITED).json()))
    done = _submit(local, original, EDITED, assertion)
    assert done.status_code == 303, done.text
    old, new = _jobs(platform)
    assert old.state is JobState.denied and new.state is JobState.approved
    assert json.loads(new.args_json) == {**EDITED, "delay-s": 0} and new.edited_from == original
    with session_scope(platform.engine, write=False) as session:
        (given,) = session.exec(select(JobApproval)).all()
    assert given.digest == new.args_digest and given.step_up
    assert given.step_up.startswith("step-up: passkey ")
    # The password still works as before (the form's other step-up).
    second = queue_send(platform, subject="second").job
    form = {"csrf_token": csrf(local, "/account"), "_password": PASSWORD, **EDITED}
    assert local.post(f"/jobs/{second}/edit", data=form, headers=LOCAL_ORIGIN).status_code == 303
