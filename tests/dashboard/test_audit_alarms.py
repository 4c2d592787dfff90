"""The audit trail raises a tamper alarm (`authority-row-invalid`) only for what is really
wrong (SPEC §19): looking at every kind of job on every page writes none, and a policy
changed outside aat on a job that still waits, or waits for a worker, writes one.

A real dashboard over HTTP on a real database (SQLite and PostgreSQL), the real worker
running the example tools. Jobs run at once (the run form's reversible run, `run_tool`)
carry no policy signature: nobody decides them, so there is nothing to sign. Before the page
checked a job's policy only where it decides something, each look at one of them wrote an
alarm saying the row had been changed outside aat.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from dash_helpers import ORIGIN, PASSWORD, add_operator, csrf, queue_send
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlmodel import select
from stepup_helpers import preview_landed

from webplatform.canonical import args_digest
from webplatform.config import EXAMPLES_ROOT
from webplatform.jobs import calls, leases
from webplatform.jobs import states as jobs
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import job_answer
from webplatform.jobs.withdrawal import withdraw
from webplatform.platform import Actor, Platform
from webplatform.process import runner
from webplatform.registry import RegistryLoader
from webplatform.store.engine import session_scope
from webplatform.store.models import AuditEvent, Job, JobState, Surface, utcnow
from webplatform.store.seals import FORGED_EVENT
from webplatform.trust import rulebook
from webplatform.trust.authority import report_forged
from webplatform.worker import Worker

AGENT = Actor(surface=Surface.mcp_http, client="test-agent")
RULES = """
- effect: allow
  tool: outbox
  action: send-message
  args: {to: ruled@example.org}
  expires_in: 1h
- effect: ask
  tool: hello-world
  action: greet
  args: {name: Asked}
"""


def _job(platform: Platform, job_id: int) -> Job:
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job


def _alarms(platform: Platform) -> list[str]:
    report_forged(platform)  # whatever this process noticed and has not written yet
    with session_scope(platform.engine, write=False) as session:
        rows = session.exec(select(AuditEvent).where(AuditEvent.event == FORGED_EVENT)).all()
        return [row.detail or "" for row in rows]


def _run_worker(platform: Platform) -> None:
    worker = Worker(
        platform=platform,
        settings=platform.settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        worker_id="w-alarms",
    )
    while worker.run_once():
        pass


def _decide(client: TestClient, platform: Platform, job_id: int, verb: str) -> None:
    # As an operator decides: on the card once its preview is there (an approval of a
    # pending preview comes back once, when the worker runs the preview again).
    preview_landed(platform, job_id)
    form = {
        "csrf_token": csrf(client),
        "password": PASSWORD,
        "digest": _job(platform, job_id).args_digest,
        "return_to": "job",
    }
    r = client.post(f"/jobs/{job_id}/{verb}", data=form, headers=ORIGIN)
    assert r.status_code == 303, r.text


def _run_form(client: TestClient, path: str, fields: dict[str, str], **extra: str) -> int:
    data = {"csrf_token": csrf(client, path), **{f"arg:{k}": v for k, v in fields.items()}}
    r = client.post(path, data={**data, **extra}, headers=ORIGIN)
    assert r.status_code == 303, r.text
    return int(r.headers["location"].rsplit("/", 1)[1].split("?")[0])


def _run_tool(platform: Platform, tool: str, action: str, args: dict[str, Any]) -> int:
    """An agent's plain `run_tool` of a reversible action: it runs at once."""
    call = RunCall(kind="tool", name=tool, action=action, args=args)
    answer = request_run(platform=platform, call=call, actor=AGENT, consent=Consent.NONE)
    assert answer.job is not None
    return answer.job


def _queued(platform: Platform, **args: Any) -> int:
    job_id = queue_send(platform, **args).job
    assert job_id is not None
    return job_id


def _lost(platform: Platform) -> int:
    """A reversible call whose requester died while it ran: reaped as lost."""
    args = {"name": "gone"}
    call = calls.Call(
        kind="tool",
        name="hello-world",
        action="greet",
        args=args,
        digest=args_digest(kind="tool", name="hello-world", action="greet", args=args),
        surface=Surface.mcp_http,
        irreversible=False,
        client="test-agent",
    )
    start = calls.Running(worker_id="dead-requester", lease_s=1)
    job = platform.transact(lambda s: calls.create_job(session=s, call=call, start=start))
    later = utcnow() + timedelta(minutes=5)
    assert platform.transact(lambda s: leases.reap_lost(session=s, now=later)) == 1
    return job.id or 0


def _every_kind(platform: Platform, ada: TestClient) -> dict[str, int]:
    """One job of every kind an operator or an agent can make, each in its final state."""
    rulebook.add(platform, rulebook.parse(rulebook.Source(RULES), platform), by="ada")
    send = "/run/tool/outbox/send-message"
    message = {"to": "bob@example.org", "subject": "s", "body": "b"}
    made = {
        "run form, reversible": _run_form(ada, "/run/tool/hello-world/greet", {"name": "Zoë"}),
        "run form, irreversible": _run_form(ada, send, message, confirm="yes", password=PASSWORD),
        "run_tool": _run_tool(platform, "hello-world", "greet", {"name": "Ann"}),
        "run_tool, failed": _run_tool(
            platform, "outbox", "preview-message", {**message, "delay-s": 99999}
        ),
        "lost": _lost(platform),
        "allowed by a rule": _queued(platform, to="ruled@example.org"),
    }
    asked = request_run(
        platform=platform,
        call=RunCall(kind="tool", name="hello-world", action="greet", args={"name": "Asked"}),
        actor=AGENT,
        consent=Consent.NONE,
    )
    assert asked.job is not None
    made["reversible, held by an ask rule, approved"] = asked.job
    made["approved"] = _queued(platform, subject="approved")
    # Its preview fails (the delay is out of range), so once approved the worker's second run
    # of the preview sends it back to its approvers instead of running it (SPEC §20).
    made["approved, sent back by its preview"] = _queued(platform, **{"delay-s": 99999})
    made["denied"] = _queued(platform, subject="denied")
    made["expired"] = _queued(platform, subject="expired")
    made["withdrawn"] = _queued(platform, subject="withdrawn")
    made["cancelled while waiting"] = _queued(platform, subject="cancelled")
    made["edited"] = _queued(platform, subject="before the edit")
    approved = ("reversible, held by an ask rule, approved", "approved")
    for kind in (*approved, "approved, sent back by its preview"):
        _decide(ada, platform, made[kind], "approve")
    _decide(ada, platform, made["denied"], "deny")
    edit = {"csrf_token": csrf(ada), "_password": PASSWORD, **message, "subject": "edited"}
    edited = ada.post(f"/jobs/{made['edited']}/edit", data=edit, headers=ORIGIN)
    assert edited.status_code == 303, edited.text
    made["edited into"] = int(edited.headers["location"].split("/jobs/")[1].split("?")[0])
    assert withdraw(platform=platform, job_id=made["withdrawn"], actor=AGENT) is JobState.denied
    platform.transact(
        lambda s: jobs.cancel(session=s, job_id=made["cancelled while waiting"], actor="ada")
    )
    later = utcnow() + timedelta(days=30)
    assert platform.transact(lambda s: jobs.expire_due(session=s, now=later)) >= 1
    _run_worker(platform)
    # Made after the worker ran: one still waits, one waits for a worker, one was cancelled
    # after its approval.
    made["waiting"] = _queued(platform, subject="waiting")
    made["approved, not started"] = _queued(platform, subject="not started")
    made["approved, then cancelled"] = _queued(platform, subject="cancelled later")
    for kind in ("approved, not started", "approved, then cancelled"):
        _decide(ada, platform, made[kind], "approve")
    platform.transact(
        lambda s: jobs.cancel(session=s, job_id=made["approved, then cancelled"], actor="ada")
    )
    return made


FINAL = {
    "run form, reversible": JobState.succeeded,
    "run form, irreversible": JobState.succeeded,
    "run_tool": JobState.succeeded,
    "run_tool, failed": JobState.failed,
    "lost": JobState.lost,
    "allowed by a rule": JobState.succeeded,
    "reversible, held by an ask rule, approved": JobState.succeeded,
    "approved": JobState.succeeded,
    "approved, sent back by its preview": JobState.pending_approval,
    "denied": JobState.denied,
    "expired": JobState.expired,
    "withdrawn": JobState.denied,
    "cancelled while waiting": JobState.cancelled,
    "edited": JobState.denied,
    "edited into": JobState.succeeded,
    "waiting": JobState.pending_approval,
    "approved, not started": JobState.approved,
    "approved, then cancelled": JobState.cancelled,
}


def _walk(platform: Platform, client: TestClient, made: dict[str, int]) -> None:
    """Every page an operator or an agent reads about these jobs, as they read it."""
    pages = ["/", "/approvals", "/approvals?newest_first=1", "/jobs", "/jobs.csv", "/jobs.xlsx"]
    pages += [f"/jobs?state={state.value}" for state in JobState]
    for job_id in made.values():
        pages += [f"/jobs/{job_id}", f"/jobs?tool={_job(platform, job_id).name}"]
    pages.append(f"/jobs/{made['waiting']}/edit")
    for page in pages:
        for headers in ({}, {"HX-Request": "true"}):
            assert client.get(page, headers=headers).status_code == 200, page
    for job_id in made.values():  # the agent's `job_status`
        job_answer(platform=platform, job_id=job_id)


@pytest.fixture
def ada(platform: Platform, client_as: Callable[[str], TestClient]) -> TestClient:
    """Operator ada (admin: she may make rules), logged in."""
    add_operator(platform, "ada")
    return client_as("ada")


def test_looking_at_every_kind_of_job_on_every_page_raises_no_alarm(
    platform: Platform, ada: TestClient
) -> None:
    made = _every_kind(platform, ada)
    assert {kind: _job(platform, job_id).state for kind, job_id in made.items()} == FINAL
    # Every state a job can end or wait in, but the two a test cannot hold still.
    assert set(FINAL.values()) == set(JobState) - {JobState.running, JobState.timed_out}
    assert _job(platform, made["allowed by a rule"]).allowed_by_rule is not None
    assert _job(platform, made["edited into"]).edited_from == made["edited"]
    unsigned = [k for k, job_id in made.items() if _job(platform, job_id).policy_signature is None]
    assert set(unsigned) == {"run form, reversible", "run_tool", "run_tool, failed", "lost"}
    _walk(platform, ada, made)
    assert _alarms(platform) == []


@pytest.mark.parametrize(
    "forgery", ["UPDATE job SET self_approval = false", "UPDATE job SET policy_signature = NULL"]
)
def test_a_policy_changed_outside_aat_on_a_job_that_waits_raises_the_alarm(
    platform: Platform, ada: TestClient, forgery: str
) -> None:
    made = _every_kind(platform, ada)
    forged = {made["waiting"], made["approved, not started"]}
    with session_scope(platform.engine) as session:
        changed = session.connection().execute(
            text(f"{forgery} WHERE id IN ({', '.join(map(str, forged))})")
        )
        assert changed.rowcount == 2
    _walk(platform, ada, made)
    alarms = sorted(_alarms(platform))
    assert len(alarms) == 2, alarms
    for job_id, alarm in zip(sorted(forged), alarms, strict=True):
        assert alarm.startswith(f"policy of job {job_id}: its signature does not verify"), alarm
    card = ada.get("/approvals").text
    assert "approval policy was changed outside aat: it cannot be approved" in card
    # The worker refuses the approved one it would have started.
    _run_worker(platform)
    assert _job(platform, made["approved, not started"]).state is JobState.failed
