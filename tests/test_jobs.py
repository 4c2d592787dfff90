"""The job state machine on a real database: legal moves only, one winner per race, audit."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import Engine, event
from sqlmodel import Session

from webplatform.canonical import args_digest, canonical_json
from webplatform.jobs import calls, leases
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import IN_PROGRESS, Status
from webplatform.jobs.states import LEGAL_MOVES
from webplatform.store import (
    UNFINISHED_STATES,
    Job,
    JobState,
    Surface,
    session_scope,
    transact,
    utcnow,
)
from webplatform.store.queries import HistoryFilter
from webplatform.trust.signing import DecisionSigner

S = JobState
ALL_STATES = list(JobState)
# The state machine's tests run no worker, so nothing checks this key; tests/test_signing.py
# covers signatures end to end.
SIGNER = DecisionSigner(Ed25519PrivateKey.generate())


def _new(
    session: Session,
    state: JobState = S.pending_approval,
    *,
    name: str = "outbox",
    args: dict[str, Any] | None = None,
    ttl_s: float | None = 900,
    surface: Surface = Surface.mcp_stdio,
) -> Job:
    args = {"to": "a@example.org", "subject": "hi"} if args is None else args
    call = calls.Call(
        kind="tool",
        name=name,
        action="send-message",
        args=args,
        digest=args_digest(kind="tool", name=name, action="send-message", args=args),
        irreversible=state != S.running,
        surface=surface,
        client="opencode",
    )
    starts: dict[JobState, calls.Start] = {
        S.pending_approval: calls.Waiting(ttl_s=ttl_s, seal=SIGNER.row_seal()),
        S.approved: calls.Approved(decided_by="alice", signer=SIGNER),
        S.running: calls.Running(worker_id="w0", lease_s=30),
    }
    return calls.create_job(session=session, call=call, start=starts[state])


def _make(engine: Engine, state: JobState = S.pending_approval, **kw: Any) -> Job:
    return transact(engine, lambda s: _new(s, state, **kw))


def _state(engine: Engine, job_id: int) -> JobState:
    with session_scope(engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job.state


def test_legal_moves_are_exactly_the_specs() -> None:
    assert LEGAL_MOVES[S.pending_approval] == {S.approved, S.denied, S.expired, S.cancelled}
    assert LEGAL_MOVES[S.approved] == {S.running, S.cancelled}
    assert LEGAL_MOVES[S.running] == {
        *(S.succeeded, S.failed, S.timed_out, S.cancelled, S.lost),
        S.pending_approval,  # a preview that changed before the run (SPEC §20)
        S.approved,  # handed back: the ledger could not record the decision (SPEC §24)
    }
    for state in jobs.TERMINAL_STATES:
        assert LEGAL_MOVES[state] == frozenset()
    assert set(LEGAL_MOVES) == set(JobState)


def test_unfinished_states_are_those_a_job_can_still_leave() -> None:
    assert {s for s in JobState if LEGAL_MOVES[s]} == UNFINISHED_STATES
    assert {Status(s.value) for s in UNFINISHED_STATES} == IN_PROGRESS
    assert calls.INITIAL_STATES == UNFINISHED_STATES


LEGAL_PAIRS = [(a, b) for a in ALL_STATES for b in sorted(LEGAL_MOVES[a])]
ILLEGAL_PAIRS = [(a, b) for a in ALL_STATES for b in ALL_STATES if b not in LEGAL_MOVES[a]]


@pytest.mark.parametrize(("start", "to"), LEGAL_PAIRS, ids=lambda s: s.value)
def test_every_legal_move_happens_and_is_audited(engine: Engine, start: S, to: S) -> None:
    job = _make(engine, start)
    assert job.id is not None
    moved = transact(
        engine,
        lambda s: jobs.move(
            session=s,
            job_id=job.id or 0,
            step=jobs.Step(expected=start, to=to, actor="bob", address="::1"),
        ),
    )
    assert moved.state == to
    assert moved.updated_at >= job.updated_at
    with session_scope(engine, write=False) as session:
        last = jobs.audit_events(session=session, job_id=job.id)[-1]
    assert (last.from_state, last.to_state, last.actor, last.address) == (
        start.value,
        to.value,
        "bob",
        "::1",
    )


@pytest.mark.parametrize(("start", "to"), ILLEGAL_PAIRS, ids=lambda s: s.value)
def test_every_illegal_move_raises_and_changes_nothing(engine: Engine, start: S, to: S) -> None:
    job = _make(engine, S.pending_approval)
    with pytest.raises(jobs.IllegalMove):
        transact(
            engine,
            lambda s: jobs.move(
                session=s, job_id=job.id or 0, step=jobs.Step(expected=start, to=to, actor="x")
            ),
        )
    assert _state(engine, job.id or 0) == S.pending_approval


def test_an_irreversible_job_cannot_be_created_running(engine: Engine) -> None:
    args: dict[str, Any] = {}
    with pytest.raises(jobs.IllegalMove), session_scope(engine) as session:
        call = calls.Call(
            kind="tool",
            name="outbox",
            action="send-message",
            args=args,
            digest=args_digest(kind="tool", name="outbox", action="send-message", args=args),
            irreversible=True,
            surface=Surface.cli,
        )
        calls.create_job(session=session, call=call, start=calls.Running(worker_id="w", lease_s=10))


def test_create_refuses_a_digest_of_other_arguments(engine: Engine) -> None:
    with pytest.raises(jobs.DigestMismatch), session_scope(engine) as session:
        call = calls.Call(
            kind="tool",
            name="outbox",
            action="send-message",
            args={"to": "b@example.org"},
            digest=args_digest(kind="tool", name="outbox", action="send-message", args={}),
            irreversible=True,
            surface=Surface.cli,
        )
        calls.create_job(session=session, call=call, start=calls.Waiting())


def test_created_job_keeps_the_call_and_who_asked(engine: Engine) -> None:
    job = _make(engine, args={"to": "zoë@example.org", "b": [1, 2]})
    with session_scope(engine, write=False) as session:
        stored = jobs.get_job(session=session, job_id=job.id or 0)
        events = jobs.audit_events(session=session, job_id=job.id or 0)
    assert stored is not None
    assert json.loads(stored.args_json) == {"to": "zoë@example.org", "b": [1, 2]}
    assert stored.surface is Surface.mcp_stdio and stored.client == "opencode"
    assert stored.expires_at is not None
    assert stored.expires_at - stored.created_at == timedelta(seconds=900)
    assert [e.event for e in events] == ["created"]


def test_job_created_approved_records_the_operator_decision(engine: Engine) -> None:
    job = _make(engine, S.approved)
    assert job.decided_by == "alice" and job.decided_at is not None
    with session_scope(engine, write=False) as session:
        events = [e.event for e in jobs.audit_events(session=session, job_id=job.id or 0)]
    assert events == ["created", "approved"]


def test_stale_move_names_the_winner(engine: Engine) -> None:
    job = _make(engine)
    transact(
        engine,
        lambda s: jobs.approve(
            signer=SIGNER, session=s, job_id=job.id or 0, operator="alice", digest=job.args_digest
        ),
    )
    with pytest.raises(jobs.StaleState, match="already approved by alice") as info:
        transact(
            engine,
            lambda s: jobs.deny(session=s, job_id=job.id or 0, operator="bob", reason="no"),
        )
    assert info.value.actual == S.approved and info.value.decided_by == "alice"


def test_unknown_job_is_not_found(engine: Engine) -> None:
    with pytest.raises(jobs.JobNotFound):
        transact(
            engine,
            lambda s: jobs.approve(signer=SIGNER, session=s, job_id=999, operator="a", digest="0"),
        )


def test_two_operators_approving_at_once_get_exactly_one_winner(engine: Engine) -> None:
    for _ in range(10):
        job = _make(engine)
        barrier = threading.Barrier(2)
        outcomes: dict[str, object] = {}

        def decide(
            operator: str,
            job: Job = job,
            barrier: threading.Barrier = barrier,
            outcomes: dict[str, object] = outcomes,
        ) -> None:
            barrier.wait()
            try:
                outcomes[operator] = transact(
                    engine,
                    lambda s: jobs.approve(
                        signer=SIGNER,
                        session=s,
                        job_id=job.id or 0,
                        operator=operator,
                        digest=job.args_digest,
                    ),
                )
            except jobs.StaleState as exc:
                outcomes[operator] = exc

        threads = [threading.Thread(target=decide, args=(op,)) for op in ("alice", "bob")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [op for op, out in outcomes.items() if isinstance(out, Job)]
        losers = [out for out in outcomes.values() if isinstance(out, jobs.StaleState)]
        assert len(winners) == 1 and len(losers) == 1
        assert str(losers[0]) == f"job {job.id} is already approved by {winners[0]}"
        with session_scope(engine, write=False) as session:
            events = jobs.audit_events(session=session, job_id=job.id or 0)
        assert [e.event for e in events] == ["created", "approved"]


def test_approval_after_expiry_is_a_refusal(engine: Engine) -> None:
    job = _make(engine, ttl_s=900)
    late = job.created_at + timedelta(seconds=901)
    with pytest.raises(jobs.ApprovalExpired):
        transact(
            engine,
            lambda s: jobs.approve(
                signer=SIGNER,
                session=s,
                job_id=job.id or 0,
                operator="alice",
                digest=job.args_digest,
                context=jobs.Context(now=late),
            ),
        )
    # The expiry is kept although the caller's transaction ended with an exception.
    assert _state(engine, job.id or 0) == S.expired
    with pytest.raises(jobs.StaleState, match="already expired"):
        transact(
            engine,
            lambda s: jobs.approve(
                signer=SIGNER,
                session=s,
                job_id=job.id or 0,
                operator="alice",
                digest=job.args_digest,
            ),
        )


def test_approval_with_another_digest_is_refused(engine: Engine) -> None:
    job = _make(engine)
    other = args_digest(kind="tool", name="outbox", action="send-message", args={"to": "evil"})
    with pytest.raises(jobs.DigestMismatch):
        transact(
            engine,
            lambda s: jobs.approve(
                signer=SIGNER, session=s, job_id=job.id or 0, operator="a", digest=other
            ),
        )
    assert _state(engine, job.id or 0) == S.pending_approval


def test_deny_keeps_reason_and_decider(engine: Engine) -> None:
    job = _make(engine)
    denied = transact(
        engine,
        lambda s: jobs.deny(
            session=s,
            job_id=job.id or 0,
            operator="bob",
            reason="wrong person",
            context=jobs.Context(address="1.2.3.4"),
        ),
    )
    assert (denied.state, denied.reason, denied.decided_by, denied.decided_from) == (
        S.denied,
        "wrong person",
        "bob",
        "1.2.3.4",
    )


@pytest.mark.parametrize("start", [S.pending_approval, S.approved, S.running])
def test_cancel_from_every_live_state(engine: Engine, start: S) -> None:
    job = _make(engine, start)
    cancelled = transact(
        engine, lambda s: jobs.cancel(session=s, job_id=job.id or 0, actor="bob", reason="oops")
    )
    assert cancelled.state == S.cancelled and cancelled.reason == "oops"
    with pytest.raises(jobs.StaleState, match="already cancelled"):
        transact(engine, lambda s: jobs.cancel(session=s, job_id=job.id or 0, actor="bob"))


def test_expire_due_only_expires_overdue_pending_jobs(engine: Engine) -> None:
    due = [_make(engine, ttl_s=1) for _ in range(3)]
    fresh = _make(engine, ttl_s=900)
    never = _make(engine, ttl_s=None)
    approved = _make(engine, S.approved)
    later = utcnow() + timedelta(seconds=5)
    assert transact(engine, lambda s: jobs.expire_due(session=s, now=later)) == 3
    assert transact(engine, lambda s: jobs.expire_due(session=s, now=later)) == 0
    assert {_state(engine, j.id or 0) for j in due} == {S.expired}
    assert _state(engine, fresh.id or 0) == S.pending_approval
    assert _state(engine, never.id or 0) == S.pending_approval
    # An approved job nobody has claimed yet is not expired: the decision was made.
    assert _state(engine, approved.id or 0) == S.approved


def test_claim_takes_the_oldest_approved_job_with_a_lease(engine: Engine) -> None:
    first, second = _make(engine, S.approved), _make(engine, S.approved)
    _make(engine, S.pending_approval)
    claimed = transact(engine, lambda s: leases.claim_next(session=s, worker_id="w1", lease_s=10))
    assert claimed is not None and claimed.id == first.id
    assert claimed.state == S.running and claimed.worker_id == "w1"
    assert claimed.lease_expires_at is not None and claimed.started_at is not None
    assert claimed.lease_expires_at - claimed.started_at == timedelta(seconds=10)
    again = transact(engine, lambda s: leases.claim_next(session=s, worker_id="w2", lease_s=10))
    assert again is not None and again.id == second.id
    assert (
        transact(engine, lambda s: leases.claim_next(session=s, worker_id="w3", lease_s=10)) is None
    )


def test_finish_only_by_the_worker_that_holds_the_job(engine: Engine) -> None:
    _make(engine, S.approved)
    job = transact(engine, lambda s: leases.claim_next(session=s, worker_id="w1", lease_s=10))
    assert job is not None
    with pytest.raises(jobs.StaleState, match="another worker"):
        transact(
            engine,
            lambda s: leases.finish(
                session=s, job_id=job.id or 0, worker_id="w2", ending=leases.Ending(S.succeeded)
            ),
        )
    done = transact(
        engine,
        lambda s: leases.finish(
            session=s,
            job_id=job.id or 0,
            worker_id="w1",
            ending=leases.Ending(
                S.succeeded,
                exit_code=0,
                result_json='{"ok":true}',
                stdout='{"ok": true}',
                stderr="",
            ),
        ),
    )
    assert (done.state, done.exit_code, done.result_json) == (S.succeeded, 0, '{"ok":true}')
    assert done.finished_at is not None and done.lease_expires_at is None


def test_a_lost_job_is_never_run_again(engine: Engine) -> None:
    _make(engine, S.approved)
    job = transact(engine, lambda s: leases.claim_next(session=s, worker_id="w1", lease_s=10))
    assert job is not None
    job_id = job.id or 0
    # Renewed leases keep it alive; once the lease has run out it is lost.
    assert transact(engine, lambda s: leases.reap_lost(session=s)) == 0
    later = utcnow() + timedelta(seconds=11)
    assert transact(engine, lambda s: leases.reap_lost(session=s, now=later)) == 1
    assert _state(engine, job_id) == S.lost
    assert (
        transact(engine, lambda s: leases.claim_next(session=s, worker_id="w2", lease_s=10)) is None
    )
    assert not transact(
        engine, lambda s: leases.renew_lease(session=s, job_id=job_id, worker_id="w1", lease_s=10)
    )
    with pytest.raises(jobs.StaleState, match="already lost"):
        transact(
            engine,
            lambda s: leases.finish(
                session=s, job_id=job_id, worker_id="w1", ending=leases.Ending(S.succeeded)
            ),
        )
    assert transact(engine, lambda s: leases.reap_lost(session=s, now=later)) == 0
    with session_scope(engine, write=False) as session:
        lost = jobs.get_job(session=session, job_id=job_id)
    assert lost is not None and lost.error and "not re-run" in lost.error


def test_list_jobs_pages_through_a_thousand_jobs_by_keyset(engine: Engine) -> None:
    def fill(session: Session) -> None:
        for i in range(1000):
            _new(
                session,
                S.pending_approval if i % 3 else S.running,
                name="outbox" if i % 2 else "xlsx",
                args={"n": i},
                surface=Surface.cli if i % 5 == 0 else Surface.mcp_http,
            )

    transact(engine, fill)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    seen: list[int] = []
    before: int | None = None
    with session_scope(engine, write=False) as session:
        while True:
            page = jobs.list_jobs(session=session, before_id=before, limit=50)
            if not page:
                break
            assert len(page) == 50
            seen += [j.id for j in page]
            before = page[-1].id
    assert len(seen) == 1000 and seen == sorted(seen, reverse=True)
    listing = [sql for sql in statements if "FROM job" in sql]
    assert listing and all("args_json" not in sql and "stdout" not in sql for sql in listing)

    with session_scope(engine, write=False) as session:
        running = jobs.list_jobs(session=session, which=HistoryFilter(state=S.running), limit=500)
        xlsx = jobs.list_jobs(session=session, which=HistoryFilter(name="xlsx"), limit=500)
        cli = jobs.list_jobs(session=session, which=HistoryFilter(surface=Surface.cli), limit=500)
        none_yet = jobs.list_jobs(
            session=session, which=HistoryFilter(since=utcnow() + timedelta(minutes=1))
        )
        all_before = jobs.list_jobs(
            session=session, which=HistoryFilter(until=utcnow() + timedelta(minutes=1))
        )
        assert jobs.count_pending(session=session) == 666
        queue = jobs.pending_approvals(session=session, limit=5)
    assert len(running) == 334 and {j.state for j in running} == {S.running}
    assert len(xlsx) == 500 and {j.name for j in xlsx} == {"xlsx"}
    assert len(cli) == 200 and {j.surface for j in cli} == {Surface.cli}
    assert none_yet == [] and len(all_before) == 50
    assert [j.id for j in queue] == sorted(j.id or 0 for j in queue)
    assert json.loads(queue[0].args_json) == {"n": 1}


def test_prune_keeps_live_jobs_and_decisions(engine: Engine) -> None:
    pending, approved, running = _make(engine), _make(engine, S.approved), _make(engine, S.running)
    denied = _make(engine)
    transact(engine, lambda s: jobs.deny(session=s, job_id=denied.id or 0, operator="bob"))
    finished = _make(engine, S.running)
    transact(
        engine,
        lambda s: jobs.move(
            session=s,
            job_id=finished.id or 0,
            step=jobs.Step(expected=S.running, to=S.failed, actor="w0"),
        ),
    )
    future = utcnow() + timedelta(hours=1)
    assert (
        transact(engine, lambda s: jobs.prune_finished(session=s, older_than=future, batch=1)) == 2
    )
    with session_scope(engine, write=False) as session:
        kept = [
            jobs.get_job(session=session, job_id=j.id or 0) for j in (pending, approved, running)
        ]
        assert all(kept)
        assert jobs.get_job(session=session, job_id=denied.id or 0) is None
        assert [e.event for e in jobs.audit_events(session=session, job_id=denied.id or 0)] == [
            "denied"
        ]
        assert jobs.audit_events(session=session, job_id=finished.id or 0) == []


def test_heartbeats(engine: Engine) -> None:
    with session_scope(engine) as session:
        assert not jobs.fresh_heartbeat(session=session, role="dashboard", within_s=10)
        jobs.beat(session=session, process_id="d1", role="dashboard", host="h", pid=1)
        jobs.beat(session=session, process_id="d1", role="dashboard", host="h", pid=1)
        assert jobs.fresh_heartbeat(session=session, role="dashboard", within_s=10)
        assert not jobs.fresh_heartbeat(session=session, role="worker", within_s=10)
        later = utcnow() + timedelta(seconds=30)
        assert not jobs.fresh_heartbeat(session=session, role="dashboard", within_s=10, now=later)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(args=st.dictionaries(st.text(), json_values, max_size=8), seed=st.randoms())
def test_digest_ignores_key_order_and_follows_values(args: dict[str, Any], seed: Any) -> None:
    items = list(args.items())
    seed.shuffle(items)
    shuffled = dict(items)
    assert canonical_json(shuffled) == canonical_json(args)
    same = json.loads(json.dumps(args))
    digest = args_digest(kind="tool", name="t", action="a", args=args)
    assert args_digest(kind="tool", name="t", action="a", args=shuffled) == digest
    assert args_digest(kind="tool", name="t", action="a", args=same) == digest
    assert args_digest(kind="tool", name="t", action="a", args={**args, "\x00x": 1}) != digest
    assert args_digest(kind="agent", name="t", action="a", args=args) != digest


@hsettings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    attempts=st.lists(
        st.tuples(st.sampled_from(ALL_STATES), st.sampled_from(ALL_STATES)), max_size=12
    ),
    start=st.sampled_from(sorted(calls.INITIAL_STATES)),
)
def test_random_moves_only_ever_follow_legal_moves(
    engine: Engine, attempts: list[tuple[S, S]], start: S
) -> None:
    job = _make(engine, start)
    job_id = job.id or 0
    current = start
    for expected, to in attempts:
        try:
            transact(
                engine,
                lambda s, e=expected, t=to: jobs.move(
                    session=s, job_id=job_id, step=jobs.Step(expected=e, to=t, actor="h")
                ),
            )
        except jobs.IllegalMove:
            assert to not in LEGAL_MOVES[expected]
        except jobs.StaleState as exc:
            assert expected != current and exc.actual == current
        else:
            assert expected == current and to in LEGAL_MOVES[current]
            current = to
        assert _state(engine, job_id) == current
    with session_scope(engine, write=False) as session:
        events = jobs.audit_events(session=session, job_id=job_id)
    chain = [(e.from_state, e.to_state) for e in events if e.from_state]
    for before, after in chain:
        assert S(after) in LEGAL_MOVES[S(before)]
