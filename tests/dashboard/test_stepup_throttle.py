"""Password throttles that stop guessing without locking an operator out of her own session
(SPEC §15, §20).

Anyone who can reach `/login` can fail five logins for a name; that locks further logins for
the name (and the address), but never the password its operator types on a card in the
session she already has: step-up passwords are counted on that session. Her own wrong
passwords there are still throttled, and the refusal says they were typed in this session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dash_helpers import BASE, ORIGIN, PASSWORD, add_operator, csrf, queue_send
from fastapi.testclient import TestClient

from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.store.engine import session_scope
from webplatform.store.models import JobState


def _job_state(platform: Platform, job_id: int) -> tuple[JobState, str]:
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job.state, job.args_digest


def _approve(client: TestClient, platform: Platform, job_id: int, password: str) -> Any:
    form = {
        "csrf_token": csrf(client),
        "digest": _job_state(platform, job_id)[1],
        "password": password,
        "return_to": "job",
    }
    return client.post(f"/jobs/{job_id}/approve", data=form, headers=ORIGIN)


def test_a_strangers_failed_logins_do_not_stop_her_approving(
    platform: Platform, app: Any, client_as: Callable[[str], TestClient]
) -> None:
    add_operator(platform, "ada")
    ada = client_as("ada")
    job_id = queue_send(platform).job
    assert job_id is not None
    # Someone else, same address (an agent on this host), no credentials at all.
    with TestClient(app, base_url=BASE, follow_redirects=False) as stranger:
        for _ in range(5):
            r = stranger.post(
                "/login", data={"username": "ada", "password": "guess"}, headers=ORIGIN
            )
            assert r.status_code == 401
        locked = stranger.post(
            "/login", data={"username": "ada", "password": "guess"}, headers=ORIGIN
        )
        assert locked.status_code == 429  # guessing at /login is still stopped
    r = _approve(ada, platform, job_id, PASSWORD)
    assert r.status_code == 303, r.text
    assert _job_state(platform, job_id)[0] is JobState.approved


def test_her_own_wrong_step_ups_are_throttled_on_her_session(platform: Platform, client_as) -> None:
    add_operator(platform, "ada")
    ada = client_as("ada")
    job_id = queue_send(platform).job
    assert job_id is not None
    for _ in range(5):
        r = _approve(ada, platform, job_id, "not it")
        assert r.status_code == 403 and "wrong password" in r.text
    r = _approve(ada, platform, job_id, PASSWORD)
    assert r.status_code == 403
    assert "too many wrong passwords typed in this session" in r.text
    assert _job_state(platform, job_id)[0] is JobState.pending_approval
