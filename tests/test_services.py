"""The one door to a run: validation, the gate, the queue and inline runs, on real databases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stepup_helpers import job_step_up, password_step_up

from webplatform.config import Settings
from webplatform.jobs import decisions
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Answer, Refusal, Status, answered
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import job_answer, wait_for_job
from webplatform.platform import Actor, Platform
from webplatform.store.engine import session_scope
from webplatform.store.models import JobState, Surface
from webplatform.trust.stepup import StepUp
from webplatform.worker import make_worker

AGENT = Actor(surface=Surface.mcp_stdio, client="test-agent")
OPERATOR = Actor(surface=Surface.dashboard, operator="ada", address="127.0.0.1")
MESSAGE = {"to": "ops@example.org", "subject": "please send the report", "body": "Dobrý den"}
STEP_UP = password_step_up("ada", name="outbox", action="send-message", args=MESSAGE)


def send_message(
    platform: Platform,
    *,
    actor: Actor = AGENT,
    consent: Consent = Consent.QUEUE,
    step_up: StepUp | None = None,
) -> Answer:
    """Ask for the irreversible `outbox send-message` with the test message."""
    return answered(
        request_run,
        platform=platform,
        call=RunCall(kind="tool", name="outbox", action="send-message", args=MESSAGE),
        actor=actor,
        consent=consent,
        step_up=step_up,
    )


def outbox(settings: Settings) -> list[Path]:
    folder = settings.home / "outbox"
    return sorted(folder.glob("*.json")) if folder.exists() else []


def test_reversible_runs_now_and_is_recorded(platform: Platform) -> None:
    answer = answered(
        request_run,
        platform=platform,
        call=RunCall(kind="tool", name="hello-world", action="greet", args={"name": "Žofie"}),
        actor=AGENT,
        consent=Consent.NONE,
    )
    assert answer.status is Status.succeeded
    assert answer.result == {"greeting": "Hello, Žofie!"}
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=answer.job or 0)
        assert job is not None
        assert (job.state, job.surface, job.client) == ("succeeded", "mcp-stdio", "test-agent")
        assert json.loads(job.args_json) == {"name": "Žofie"}


def test_action_may_be_left_out_only_when_there_is_one(platform: Platform) -> None:
    one = answered(
        request_run,
        platform=platform,
        call=RunCall(kind="tool", name="hello-world", action=None, args={"name": "x"}),
        actor=AGENT,
        consent=Consent.NONE,
    )
    assert one.status is Status.succeeded
    many = answered(
        request_run,
        platform=platform,
        call=RunCall(kind="tool", name="xlsx", action=None, args={}),
        actor=AGENT,
        consent=Consent.NONE,
    )
    assert many.status is Status.invalid
    assert "list-sheets" in (many.error or "")


def test_irreversible_without_confirm_names_the_confirmed_tool(
    platform: Platform, settings: Settings
) -> None:
    answer = send_message(platform, consent=Consent.NONE)
    assert answer.status is Status.approval_required
    assert answer.use == "run_tool_confirmed"
    assert answer.job is None
    assert outbox(settings) == []


def test_confirmed_irreversible_is_queued_not_sent_and_warns_without_dashboard(
    platform: Platform, settings: Settings
) -> None:
    answer = send_message(platform)
    assert answer.status is Status.pending_approval
    assert answer.approval_url == f"http://127.0.0.1:8000/jobs/{answer.job}"
    assert answer.warning and "aat serve" in answer.warning
    make_worker(platform).run_once()
    assert outbox(settings) == [], "a pending job must never run"


def test_approved_job_runs_once_and_denied_one_never(
    platform: Platform, settings: Settings
) -> None:
    first = send_message(platform)
    second = send_message(platform)
    assert first.job and second.job
    with session_scope(platform.engine) as session:
        digest = jobs.get_job(session=session, job_id=first.job).args_digest  # type: ignore[union-attr]
    decisions.approve(
        platform=platform,
        job_id=first.job,
        operator="ada",
        digest=digest,
        address=None,
        step_up=job_step_up(platform, first.job, "ada"),
    )
    decisions.deny(
        platform=platform, job_id=second.job, operator="ada", reason="not today", address=None
    )
    worker = make_worker(platform)
    while worker.run_once():
        pass
    assert len(outbox(settings)) == 1
    assert wait_for_job(platform=platform, job_id=first.job, timeout_s=1).status is Status.succeeded
    denied = job_answer(platform=platform, job_id=second.job)
    assert (denied.status, denied.reason, denied.decided_by) == (Status.denied, "not today", "ada")
    assert denied.is_error


def test_dashboard_operator_run_is_approved_by_that_operator(platform: Platform) -> None:
    answer = send_message(platform, actor=OPERATOR, consent=Consent.OPERATOR, step_up=STEP_UP)
    assert answer.status is Status.approved
    assert answer.decided_by == "ada"


def test_only_a_dashboard_operator_can_pre_approve(platform: Platform) -> None:
    with pytest.raises(PermissionError):
        send_message(platform, consent=Consent.OPERATOR, step_up=STEP_UP)


def test_deny_irreversible_switch_refuses_mcp_and_queues_nothing(settings: Settings) -> None:
    platform = Platform(settings.model_copy(update={"mcp_deny_irreversible": True}))
    answer = send_message(platform)
    assert answer.status is Status.refused
    assert answer.job is None
    with session_scope(platform.engine) as session:
        assert jobs.count_pending(session=session) == 0


def test_bad_calls_are_invalid_with_schema_or_suggestions(platform: Platform) -> None:
    wrong_type = answered(
        request_run,
        platform=platform,
        call=RunCall(kind="tool", name="hello-world", action="greet", args={"name": 5}),
        actor=AGENT,
        consent=Consent.NONE,
    )
    assert wrong_type.status is Status.invalid
    assert wrong_type.schema == [
        {"name": "name", "type": "string", "required": True, "description": "Who to greet"}
    ]
    unknown_tool = answered(
        request_run,
        platform=platform,
        call=RunCall(kind="tool", name="helo-world", action="greet", args={}),
        actor=AGENT,
        consent=Consent.NONE,
    )
    assert unknown_tool.did_you_mean == ["hello-world"]
    plural = answered(
        request_run,
        platform=platform,
        call=RunCall(kind="tool", name="xlsx", action="sheets-list", args={}),
        actor=AGENT,
        consent=Consent.NONE,
    )
    assert plural.did_you_mean == ["list-sheets"]
    with session_scope(platform.engine) as session:
        assert jobs.list_jobs(session=session) == [], "invalid calls create no job"


def test_unknown_job_is_invalid(platform: Platform) -> None:
    answer = job_answer(platform=platform, job_id=424242)
    assert answer.status is Status.invalid


def test_states_map_to_distinct_statuses() -> None:
    assert {s.value for s in JobState} <= {s.value for s in Status}


def test_one_requester_keeps_at_most_max_pending_calls_waiting(platform: Platform) -> None:
    answers = [send_message(platform) for _ in range(205)]
    waiting = [a for a in answers if a.status is Status.pending_approval]
    refused = [a for a in answers if a.status is Status.refused]
    assert len(waiting) == 20 and len(refused) == 185
    assert refused[0].job is None
    assert "AAT_MAX_PENDING=20" in (refused[0].error or "")
    assert "approvals page" in (refused[0].error or "")
    # Another client, and the operator's own requests, are not held up by that one.
    other = Actor(surface=Surface.mcp_stdio, client="the-real-agent")
    assert send_message(platform, actor=other).status is Status.pending_approval
    # Once an operator decides one, the first client may ask again.
    decisions.deny(
        platform=platform, job_id=waiting[0].job or 0, operator="ada", reason="junk", address=None
    )
    assert send_message(platform).status is Status.pending_approval
    assert send_message(platform).status is Status.refused


def test_arguments_over_max_args_bytes_are_invalid(platform: Platform) -> None:
    big = {**MESSAGE, "body": "x" * (256 * 1024)}
    answer = answered(
        request_run,
        platform=platform,
        call=RunCall(kind="tool", name="outbox", action="send-message", args=big),
        actor=AGENT,
        consent=Consent.QUEUE,
    )
    assert answer.status is Status.invalid and answer.job is None
    assert "AAT_MAX_ARGS_BYTES" in (answer.error or "") and "\n" not in (answer.error or "")
    with session_scope(platform.engine) as session:
        assert jobs.count_pending(session=session) == 0


def test_the_core_raises_a_refusal_and_the_surface_answers_it(platform: Platform) -> None:
    """A refused call is an exception in the core (one shape), carrying the very answer a
    surface gives its caller."""
    call = {
        "platform": platform,
        "call": RunCall(kind="tool", name="helo-world", action="greet", args={}),
        "actor": AGENT,
        "consent": Consent.NONE,
    }
    with pytest.raises(Refusal) as refused:
        request_run(**call)
    assert refused.value.answer.status is Status.invalid
    assert str(refused.value) == refused.value.answer.error
    assert answered(request_run, **call) == refused.value.answer
