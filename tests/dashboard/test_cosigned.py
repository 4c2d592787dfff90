"""Several approvals mean several people, whatever a database writer does (SPEC §11, §19).

Each test is an attack by someone who can write the database (a real SQLite file, and
PostgreSQL), against the real dashboard over HTTP and the real worker: an approval row
inserted in another operator's name, and the policy columns of a waiting job lowered
(two approvals to one, self-approval back on, the asker forgotten). Before approvals and
policies were signed, each of them ran a message that one human approved.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from dash_helpers import ORIGIN, PASSWORD, add_operator, csrf
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlmodel import select

from webplatform.config import EXAMPLES_ROOT
from webplatform.jobs import states as jobs
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Actor, Platform
from webplatform.process import runner
from webplatform.registry import RegistryLoader
from webplatform.store.agents import add_agent
from webplatform.store.engine import session_scope
from webplatform.store.models import AuditEvent, Job, JobState, Surface, utcnow
from webplatform.store.seals import FORGED_EVENT, policy_problem
from webplatform.trust import signing
from webplatform.trust.authority import seal_for
from webplatform.trust.decidability import POLICY_INVALID
from webplatform.worker import Worker


def _job(platform: Platform, job_id: int) -> Job:
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job


def _sql(platform: Platform, statement: str, **params: Any) -> None:
    """What the attacker does: one statement through the database's own connection."""
    with session_scope(platform.engine) as session:
        session.connection().execute(text(statement), params)


def _events(platform: Platform, event: str) -> list[str]:
    with session_scope(platform.engine, write=False) as session:
        rows = session.exec(select(AuditEvent).where(AuditEvent.event == event)).all()
        return [row.detail or "" for row in rows]


def _approve(client: TestClient, platform: Platform, job_id: int) -> Any:
    form = {
        "csrf_token": csrf(client),
        "password": PASSWORD,
        "digest": _job(platform, job_id).args_digest,
        "return_to": "job",
    }
    return client.post(f"/jobs/{job_id}/approve", data=form, headers=ORIGIN)


def _run_worker(platform: Platform) -> None:
    worker = Worker(
        platform=platform,
        settings=platform.settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        worker_id="w-cosigned",
    )
    while worker.run_once():
        pass


def _outbox(platform: Platform) -> list[str]:
    folder = platform.settings.home / "outbox"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.fixture
def two_needed(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> int:
    """A call by ada's agent that needs two approvals, neither of them ada's; the id."""
    monkeypatch.setattr(platform.settings, "approvals_required", 2)
    monkeypatch.setattr(platform.settings, "self_approval", False)
    for name in ("ada", "bob", "cy"):
        add_operator(platform, name)
    with session_scope(platform.engine) as session:
        add_agent(session=session, name="ada-bot", owner="ada", seal=seal_for(platform))
    answer = request_run(
        platform=platform,
        call=RunCall(
            kind="tool",
            name="outbox",
            action="send-message",
            args={"to": "x@example.org", "subject": "needs two", "body": "b"},
        ),
        actor=Actor(surface=Surface.mcp_http, agent="ada-bot", client="opencode"),
        consent=Consent.QUEUE,
    )
    assert answer.job is not None and answer.approvals_needed == 2
    return answer.job


def test_an_approval_row_inserted_by_sql_is_no_second_approval(
    platform: Platform, client_as: Any, two_needed: int
) -> None:
    job_id = two_needed
    digest = _job(platform, job_id).args_digest
    _sql(
        platform,
        "INSERT INTO job_approval (job_id, operator, digest, at) VALUES (:j, 'cy', :d, :at)",
        j=job_id,
        d=digest,
        at=utcnow().replace(tzinfo=None),
    )
    bob = client_as("bob")
    assert "0 of 2 approvals" in bob.get("/approvals").text  # cy's row is no approval
    assert job_answer(platform=platform, job_id=job_id).approvals_needed == 2  # nor for the agent
    assert _approve(bob, platform, job_id).status_code == 303
    _run_worker(platform)
    assert _job(platform, job_id).state is JobState.pending_approval
    assert _outbox(platform) == []
    assert "1 of 2 approvals (approved by bob)" in bob.get(f"/jobs/{job_id}").text
    forged = _events(platform, FORGED_EVENT)
    assert len(forged) == 1 and forged[0].startswith(f"approval of job {job_id} by cy: its")

    # cy's own approval replaces the row made in their name, and the call runs once.
    assert _approve(client_as("cy"), platform, job_id).status_code == 303
    job = _job(platform, job_id)
    assert job.state is JobState.approved and job.decided_by == "bob, cy"
    _run_worker(platform)
    assert _job(platform, job_id).state is JobState.succeeded
    assert len(_outbox(platform)) == 1


LOWERED = {
    "one approval instead of two": ("approvals_required = 1", ["bob"]),
    "self-approval back on": ("self_approval = true", ["ada", "bob"]),
    "the asker forgotten": ("asked_by_operator = NULL", ["ada", "bob"]),
}


@pytest.mark.parametrize("change", LOWERED, ids=list(LOWERED))
def test_a_policy_lowered_by_sql_makes_the_job_unapprovable(
    platform: Platform, client_as: Any, two_needed: int, change: str
) -> None:
    job_id = two_needed
    assignment, approvers = LOWERED[change]
    _sql(platform, f"UPDATE job SET {assignment} WHERE id = :j", j=job_id)
    for name in approvers:
        refused = _approve(client_as(name), platform, job_id)
        assert refused.status_code == 403, refused.text
        assert "approval policy" in refused.text and "changed outside aat" in refused.text
    _run_worker(platform)
    assert _job(platform, job_id).state is JobState.pending_approval
    assert _outbox(platform) == []
    card = client_as("cy").get("/approvals").text
    assert "approval policy was changed outside aat: it cannot be approved" in card
    forged = _events(platform, FORGED_EVENT)
    assert len(forged) == 1 and forged[0].startswith(f"policy of job {job_id}: its signature")


@pytest.mark.parametrize(
    "assignment",
    [
        "approvals_required = 1",
        "self_approval = true",
        "asked_by_operator = 'bob'",
        "requested_by = 'another-bot'",
        "requester_proof = NULL",
        "irreversible = false",
        "client = 'claude-code'",
        "surface = 'dashboard'",
        "allowed_by_rule = 1",
        "edited_from = 1",
        "name = 'another'",
        "action = 'another'",
        "args_digest = 'd'",
    ],
)
def test_every_policy_column_is_signed(
    platform: Platform, two_needed: int, assignment: str
) -> None:
    seal = seal_for(platform)
    assert policy_problem(seal, _job(platform, two_needed)) is None
    _sql(platform, f"UPDATE job SET {assignment} WHERE id = :j", j=two_needed)
    assert policy_problem(seal, _job(platform, two_needed)) is not None


def test_a_longer_window_set_by_sql_is_refused_too(platform: Platform, two_needed: int) -> None:
    later = (utcnow() + timedelta(days=30)).replace(tzinfo=None)
    _sql(platform, "UPDATE job SET expires_at = :at WHERE id = :j", at=later, j=two_needed)
    assert policy_problem(seal_for(platform), _job(platform, two_needed)) is not None


def _decided_by_an_older_dashboard(platform: Platform, job_id: int, names: tuple[str, ...]) -> None:
    """The job approved by `names` and signed with the real key, as a dashboard that counted
    every approval row (before they were signed) would have signed it."""
    job, at = _job(platform, job_id), utcnow()
    decision = signing.decision_for(job, "approved", names, at)
    signature = signing.signer_for(platform.settings.home).sign(decision)
    _sql(
        platform,
        "UPDATE job SET state = 'approved', decided_by = :by, decided_at = :at, "
        "decision_signature = :sig WHERE id = :j",
        by=", ".join(names),
        at=at.replace(tzinfo=None),
        sig=signature,
        j=job_id,
    )


def test_the_worker_starts_no_decision_over_an_inserted_approval_row(
    platform: Platform, client_as: Any, two_needed: int
) -> None:
    job_id = two_needed
    assert _approve(client_as("bob"), platform, job_id).status_code == 303
    digest = _job(platform, job_id).args_digest
    _sql(
        platform,
        "INSERT INTO job_approval (job_id, operator, digest, at) VALUES (:j, 'cy', :d, :at)",
        j=job_id,
        d=digest,
        at=utcnow().replace(tzinfo=None),
    )
    _decided_by_an_older_dashboard(platform, job_id, ("bob", "cy"))
    _run_worker(platform)
    job = _job(platform, job_id)
    assert job.state is JobState.failed and _outbox(platform) == []
    assert "no signed approval by cy" in (job.error or "")
    refused = _events(platform, POLICY_INVALID)
    assert len(refused) == 1 and "no signed approval by cy" in refused[0]


def test_the_worker_starts_no_job_whose_policy_was_lowered(
    platform: Platform, two_needed: int
) -> None:
    job_id = two_needed
    _sql(platform, "UPDATE job SET approvals_required = 1 WHERE id = :j", j=job_id)
    _decided_by_an_older_dashboard(platform, job_id, ("bob",))
    _run_worker(platform)
    job = _job(platform, job_id)
    assert job.state is JobState.failed and _outbox(platform) == []
    assert "approval policy" in (job.error or "") and "changed outside aat" in (job.error or "")
    assert len(_events(platform, POLICY_INVALID)) == 1
