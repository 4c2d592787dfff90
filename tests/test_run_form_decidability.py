"""The run form's approve-at-once asks the decision point (SPEC §11, §21): the operator who
runs an irreversible call from the dashboard approves it only as `trust.decidability` would
let them approve it on the card: their role, their row's signature, the action's
self-approval and the approvals it needs."""

from __future__ import annotations

import pytest
from stepup_helpers import password_step_up

from webplatform.config import Settings
from webplatform.jobs.answers import Answer, Status, answered
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store import approvals
from webplatform.store.models import Surface
from webplatform.store.operators import add_operator
from webplatform.trust.authority import seal_for
from webplatform.trust.permissions import ROLE_BOOK

MESSAGE = {"to": "ops@example.org", "subject": "please send the report", "body": "Dobrý den"}


def _operator(platform: Platform, name: str, role: str) -> None:
    seal = seal_for(platform)
    platform.transact(
        lambda s: add_operator(
            session=s, name=name, password="x" * 12, seal=seal, roles=ROLE_BOOK.giving(role)
        )
    )


def _run_form(platform: Platform, operator: str) -> Answer:
    """`outbox send-message` run from the run form by `operator`, with their step-up."""
    step_up = password_step_up(operator, name="outbox", action="send-message", args=MESSAGE)
    return answered(
        request_run,
        platform=platform,
        call=RunCall(kind="tool", name="outbox", action="send-message", args=MESSAGE),
        actor=Actor(surface=Surface.dashboard, operator=operator, address="127.0.0.1"),
        consent=Consent.OPERATOR,
        step_up=step_up,
    )


def _approvers(platform: Platform, job_id: int) -> list[str]:
    rows = platform.transact(
        lambda s: approvals.approvals_of(session=s, job_id=job_id), write=False
    )
    return [r.operator for r in rows]


def test_a_viewer_s_run_form_call_waits_and_carries_no_approval_of_theirs(
    platform: Platform,
) -> None:
    # The route refuses a viewer first; the core does not lean on it: a viewer's step-up
    # approves nothing, as the card would not let them approve.
    _operator(platform, "ada", "admin")
    _operator(platform, "vic", "viewer")
    answer = _run_form(platform, "vic")
    assert answer.status is Status.pending_approval and answer.decided_by is None
    assert answer.job is not None and _approvers(platform, answer.job) == []


def test_an_approver_s_run_form_call_runs_approved_by_them(platform: Platform) -> None:
    _operator(platform, "ada", "admin")
    _operator(platform, "bob", "approver")
    answer = _run_form(platform, "bob")
    assert answer.status is Status.approved and answer.decided_by == "bob"


@pytest.mark.parametrize(
    ("setting", "approvers"),
    [({"approvals_required": 2}, ["ada"]), ({"self_approval": False}, [])],
    ids=["two-approvals", "no-self-approval"],
)
def test_an_operator_s_run_waits_when_the_policy_needs_others(
    settings: Settings, setting: dict[str, object], approvers: list[str]
) -> None:
    # Two approvals: the operator's counts as the first. No self-approval: theirs counts
    # for nothing (they asked for it).
    platform = Platform(settings.model_copy(update=setting))
    try:
        _operator(platform, "ada", "admin")
        answer = _run_form(platform, "ada")
        assert answer.status is Status.pending_approval and answer.decided_by is None
        assert answer.job is not None and _approvers(platform, answer.job) == approvers
    finally:
        platform.engine.dispose()
