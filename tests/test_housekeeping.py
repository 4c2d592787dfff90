"""Housekeeping: one pass heartbeats, expires, reaps, and prunes sessions and heartbeats."""

from __future__ import annotations

from datetime import timedelta

from seal_helpers import fresh_seal
from sqlalchemy import Engine
from sqlmodel import Session, select

from webplatform.config import Settings
from webplatform.housekeeping import STALE_HEARTBEAT_S, Housekeeper
from webplatform.store import Heartbeat, OperatorSession, session_scope, transact, utcnow
from webplatform.store.heartbeats import beat
from webplatform.store.operators import add_operator
from webplatform.store.sessions import start_session


def _sessions(engine: Engine) -> list[str]:
    with session_scope(engine, write=False) as session:
        return [s.operator for s in session.exec(select(OperatorSession)).all()]


def _heartbeats(engine: Engine) -> list[str]:
    with session_scope(engine, write=False) as session:
        return sorted(h.id for h in session.exec(select(Heartbeat)).all())


def test_one_pass_removes_expired_sessions_and_stale_heartbeats(
    engine: Engine, settings: Settings
) -> None:
    seal = fresh_seal()

    def setup(session: Session) -> None:
        add_operator(session=session, name="ada", password="long enough", seal=seal)
        add_operator(session=session, name="bob", password="long enough", seal=seal)
        start_session(session=session, operator="ada", ttl_s=-1, seal=seal)  # expired already
        start_session(session=session, operator="bob", ttl_s=3600, seal=seal)
        long_ago = utcnow() - timedelta(seconds=STALE_HEARTBEAT_S + 60)
        beat(session=session, process_id="gone", role="worker", host="h", pid=1, now=long_ago)
        beat(session=session, process_id="alive", role="worker", host="h", pid=2)

    transact(engine, setup)
    assert sorted(_sessions(engine)) == ["ada", "bob"]

    chores = Housekeeper(
        engine=engine, settings=settings, process_id="dash-1", role="dashboard"
    ).run_once()

    assert _sessions(engine) == ["bob"], "the expired session row is still there"
    assert _heartbeats(engine) == ["alive", "dash-1"], "the stale heartbeat is still there"
    assert (chores.sessions_pruned, chores.heartbeats_pruned) == (1, 1)
