"""Nothing shows an approval that is not one (SPEC §20).

A row moved to `approved` by SQL names an operator who approved nothing. Until a worker fails
it, every page that lists or shows the job (the approvals page's recent decisions, the job
history, the overview, the job page, the CSV export, the answer to a late Approve) must read
"marked approved in the database, without a valid signature", and never the name the row
carries; a real approval on the same pages still names its operator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from dash_helpers import ORIGIN, PASSWORD, add_operator, csrf, queue_send
from fastapi.testclient import TestClient
from sqlalchemy import text
from stepup_helpers import job_step_up

from webplatform.jobs import decisions
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.store.engine import session_scope
from webplatform.trust.claims import UNSIGNED_APPROVAL

FORGED_NAME = "alice"  # an operator name the forger writes; nobody of that name is logged in


def _forge(platform: Platform, job_id: int) -> None:
    with platform.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE job SET state = 'approved', decided_by = :name, decided_at = created_at "
                "WHERE id = :id"
            ),
            {"name": FORGED_NAME, "id": job_id},
        )


def _digest(platform: Platform, job_id: int) -> str:
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job.args_digest


def _approve(client: TestClient, platform: Platform, job_id: int) -> Any:
    form = {
        "csrf_token": csrf(client),
        "digest": _digest(platform, job_id),
        "password": PASSWORD,
        "return_to": "job",
    }
    return client.post(f"/jobs/{job_id}/approve", data=form, headers=ORIGIN)


@pytest.fixture
def ada(platform: Platform, client_as: Callable[[str], TestClient]) -> TestClient:
    """Operator ada's browser (the forged name is someone else's)."""
    add_operator(platform, "ada")
    add_operator(platform, FORGED_NAME)
    return client_as("ada")


def test_a_forged_approval_is_shown_nowhere_as_one(platform: Platform, ada: TestClient) -> None:
    genuine = queue_send(platform, subject="genuine").job
    forged = queue_send(platform, subject="forged").job
    assert genuine is not None and forged is not None
    assert _approve(ada, platform, genuine).status_code == 303
    _forge(platform, forged)

    job_page = ada.get(f"/jobs/{forged}").text
    pages = {
        "job page": job_page,
        "approvals page": ada.get("/approvals").text,
        "job history": ada.get("/jobs").text,
        "overview": ada.get("/").text,
        "CSV export": ada.get("/jobs.csv").text,
    }
    for where, html in pages.items():
        assert FORGED_NAME not in html, where
        assert UNSIGNED_APPROVAL in html, where
    assert "approved by" not in job_page
    # The genuine approval on the same pages still names ada.
    assert "<dt>approved by</dt><dd>ada" in ada.get(f"/jobs/{genuine}").text
    assert '"ada"' in pages["CSV export"]


def test_approving_a_forged_job_names_nobody(platform: Platform, ada: TestClient) -> None:
    # Ada's card was open when the row was forged; her click must not read "already approved
    # by alice".
    forged = queue_send(platform, subject="forged").job
    assert forged is not None
    _forge(platform, forged)
    r = _approve(ada, platform, forged)
    assert r.status_code == 409
    assert FORGED_NAME not in r.text
    assert UNSIGNED_APPROVAL in r.text
    with pytest.raises(jobs.StaleState) as refused:
        decisions.approve(
            platform=platform,
            job_id=forged,
            operator="ada",
            digest=_digest(platform, forged),
            address=None,
            step_up=job_step_up(platform, forged, "ada"),
        )
    assert refused.value.decided_by is None and FORGED_NAME not in str(refused.value)
