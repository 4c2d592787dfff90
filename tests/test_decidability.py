"""The one decision point (webplatform.trust.decidability): each reason an operator may not
decide, judged as a value, and the approve path, a denial and the page all following it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine
from sqlmodel import Session

from dashboard.data import Approvals
from webplatform.canonical import args_digest
from webplatform.jobs import calls
from webplatform.jobs import states as jobs
from webplatform.store import Job, JobState, Surface, session_scope, transact, utcnow
from webplatform.store.operators import add_operator
from webplatform.trust.decidability import (
    Decider,
    Intent,
    Refusal,
    Standing,
    Verdict,
    judge,
    read_decider,
)
from webplatform.trust.permissions import ROLE_BOOK
from webplatform.trust.signing import DecisionSigner

NOW = utcnow()
ALICE = Decider(name="alice", role="approver")


def _job(**fields: Any) -> Job:
    values: dict[str, Any] = {
        "id": 7,
        "kind": "tool",
        "name": "outbox",
        "action": "send-message",
        "args_json": "{}",
        "args_digest": "0" * 64,
        "irreversible": True,
        "state": JobState.pending_approval,
        "surface": Surface.mcp_stdio,
        "expires_at": utcnow() + timedelta(minutes=5),
        "asked_by_operator": "alice",
    }
    return Job(**(values | fields))


def _verdict(
    decider: Decider = ALICE,
    intent: Intent = Intent.approve,
    given: tuple[str, ...] = (),
    **job: Any,
) -> Verdict:
    return judge(Standing(job=_job(**job), given=given), decider, intent=intent, now=NOW)


def test_an_approver_may_approve_a_pending_job_and_nothing_more_is_needed_after() -> None:
    verdict = _verdict()
    assert verdict == Verdict(may_decide=True, still_needed=1)
    assert not verdict.expired and verdict.reason is None and verdict.on_card is None


def test_a_viewer_decides_nothing_not_even_a_denial() -> None:
    viewer = Decider(name="vic", role="viewer")
    for intent in Intent:
        verdict = _verdict(viewer, intent)
        assert not verdict.may_decide and verdict.refusal is Refusal.viewer
    assert verdict.reason is not None and verdict.reason.startswith("vic is a viewer")
    assert verdict.on_card == "You are a viewer: you see every call and decide none."


def test_an_operator_whose_role_the_page_cannot_read_is_shown_as_a_viewer() -> None:
    assert _verdict(Decider(name="alice", role=None)).refusal is Refusal.viewer


def test_the_asker_may_not_approve_or_edit_when_self_approval_is_off_but_may_deny() -> None:
    for intent in (Intent.approve, Intent.edit):
        verdict = _verdict(intent=intent, self_approval=False)
        assert verdict.refusal is Refusal.self_approval
        assert verdict.reason is not None and "may not be approved by the operator who asked" in (
            verdict.reason
        )
        assert verdict.on_card is not None and verdict.on_card.startswith("You asked for this")
    assert _verdict(intent=Intent.deny, self_approval=False).may_decide
    assert _verdict(Decider(name="bob", role="admin"), self_approval=False).may_decide


def test_an_approval_already_given_is_not_given_twice_and_says_how_many_are_still_needed() -> None:
    verdict = _verdict(given=("alice",), approvals_required=3)
    assert verdict.refusal is Refusal.already_given and verdict.still_needed == 2
    assert verdict.reason == (
        "you already approved job 7; it needs 2 more approval(s) from other operators"
    )
    assert verdict.on_card == "You approved this call; it waits for 2 more approval(s) from others."
    # An edit is a new call, which the editor's approval starts afresh.
    assert _verdict(intent=Intent.edit, given=("alice",), approvals_required=3).may_decide


def test_n_of_m_says_how_many_approvals_are_still_needed() -> None:
    assert _verdict(approvals_required=3).still_needed == 3
    verdict = _verdict(Decider(name="bob", role="approver"), given=("alice",), approvals_required=3)
    assert verdict.may_decide and verdict.still_needed == 2
    done = _verdict(given=("alice", "bob", "carol"), approvals_required=3)
    assert done.still_needed == 0


def test_an_expired_window_refuses_approvals_and_edits_but_not_a_denial() -> None:
    for intent in (Intent.approve, Intent.edit):
        verdict = _verdict(intent=intent, expires_at=NOW)
        assert verdict.expired and verdict.refusal is Refusal.expired
        assert verdict.reason == "job 7 expired before it was approved; ask for it again"
    assert _verdict(intent=Intent.deny, expires_at=NOW).may_decide
    assert _verdict(expires_at=None).may_decide  # no window: never expires


def test_a_job_no_longer_pending_is_decided_by_nobody_and_says_who_decided_it() -> None:
    for intent in Intent:
        verdict = _verdict(intent=intent, state=JobState.approved, decided_by="bob")
        assert verdict.refusal is Refusal.not_pending
        assert verdict.reason == "job 7 is already approved by bob"
    # The state is judged first: a viewer asking about a finished job hears it is finished.
    viewer = Decider(name="vic", role="viewer")
    assert _verdict(viewer, state=JobState.denied).refusal is Refusal.not_pending


def test_a_forged_operator_row_decides_nothing() -> None:
    forged = Decider(name="mallory", role=None, forged="mallory's row does not verify")
    verdict = _verdict(forged, intent=Intent.deny)
    assert verdict.refusal is Refusal.forged and verdict.reason == "mallory's row does not verify"


def test_the_package_s_own_callers_are_not_listed_operators_and_decide_as_approvers() -> None:
    assert _verdict(Decider(name="agent x", role=None, listed=False), Intent.deny).may_decide


def test_the_page_shows_the_decision_point_s_own_line() -> None:
    standing = Standing(job=_job(approvals_required=2), given=("alice",))
    page = Approvals(standing=standing, eligible=2)
    assert page.blocked_for("alice", "approver") == (
        "You approved this call; it waits for 1 more approval(s) from others."
    )
    assert page.blocked_for("bob", "approver") is None
    assert (
        page.blocked_for("vic", "viewer") == "You are a viewer: you see every call and decide none."
    )
    assert (page.given, page.required, page.asker, page.self_approval) == (
        ("alice",),
        2,
        "alice",
        True,
    )


# The approve path on a real database follows the same verdict.

SIGNER = DecisionSigner(Ed25519PrivateKey.generate())


def _queued(session: Session, *, required: int = 1, self_approval: bool = True) -> Job:
    args = {"to": "a@example.org"}
    call = calls.Call(
        kind="tool",
        name="outbox",
        action="send-message",
        args=args,
        digest=args_digest(kind="tool", name="outbox", action="send-message", args=args),
        irreversible=True,
        surface=Surface.dashboard,
        approvals_required=required,
        self_approval=self_approval,
        asked_by_operator="alice",
    )
    return calls.create_job(
        session=session, call=call, start=calls.Waiting(ttl_s=900, seal=SIGNER.row_seal())
    )


def _with_operators(engine: Engine) -> None:
    with session_scope(engine) as session:
        for name, role in (("alice", "approver"), ("bob", "approver"), ("vic", "viewer")):
            add_operator(
                session=session,
                name=name,
                password="x" * 12,
                seal=SIGNER.row_seal(),
                roles=ROLE_BOOK.giving(role),
            )


def _approve(engine: Engine, job: Job, operator: str) -> Job:
    return transact(
        engine,
        lambda s: jobs.approve(
            session=s, job_id=job.id or 0, operator=operator, digest=job.args_digest, signer=SIGNER
        ),
    )


@pytest.mark.parametrize(
    ("operator", "refused"),
    [("vic", jobs.NotAllowed), ("alice", jobs.NotAllowed), ("bob", None)],
)
def test_approve_refuses_exactly_whom_the_verdict_refuses(
    engine: Engine, operator: str, refused: type[Exception] | None
) -> None:
    _with_operators(engine)
    job = transact(engine, lambda s: _queued(s, self_approval=False))
    with session_scope(engine, write=False) as session:
        decider = read_decider(session, operator, SIGNER.row_seal())
    verdict = judge(Standing(job=job), decider, intent=Intent.approve, now=utcnow())
    if refused is None:
        assert verdict.may_decide and _approve(engine, job, operator).state is JobState.approved
        return
    with pytest.raises(refused) as info:
        _approve(engine, job, operator)
    assert str(info.value) == verdict.reason


def test_a_second_approval_by_the_same_operator_is_refused_with_what_is_still_needed(
    engine: Engine,
) -> None:
    _with_operators(engine)
    job = transact(engine, lambda s: _queued(s, required=2))
    assert _approve(engine, job, "alice").state is JobState.pending_approval
    with pytest.raises(jobs.AlreadyApproved, match="it needs 1 more approval"):
        _approve(engine, job, "alice")
    assert _approve(engine, job, "bob").decided_by == "alice, bob"


def test_a_viewer_s_denial_is_refused_and_an_agent_s_withdrawal_is_not(engine: Engine) -> None:
    _with_operators(engine)
    job = transact(engine, _queued)
    with pytest.raises(jobs.NotAllowed, match="vic is a viewer"):
        transact(
            engine,
            lambda s: jobs.deny(session=s, job_id=job.id or 0, operator="vic", signer=SIGNER),
        )
    withdrawn = transact(
        engine, lambda s: jobs.deny(session=s, job_id=job.id or 0, operator="agent a")
    )
    assert withdrawn.state is JobState.denied
