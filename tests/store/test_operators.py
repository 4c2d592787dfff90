"""Operators: argon2id hashes, validation with clear messages, sessions by token hash, and
rows signed by aat: an operator or session row added or changed by SQL counts as absent."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from argon2 import PasswordHasher
from seal_helpers import fresh_seal
from sqlalchemy import Engine
from sqlmodel import select

from webplatform.store import Operator, OperatorSession, passwords, session_scope, utcnow
from webplatform.store.audit import recent_events
from webplatform.store.meta import delete_meta, get_meta, set_meta
from webplatform.store.operators import (
    OperatorError,
    add_operator,
    authenticate,
    count_operators,
    list_operators,
    operator_role,
    remove_operator,
    set_password,
    set_role,
)
from webplatform.store.passwords import hash_password, needs_rehash, verify_password
from webplatform.store.seals import FORGED_EVENT, record_forged, sign_row
from webplatform.store.sessions import end_session, session_operator, start_session
from webplatform.trust.permissions import ROLE_BOOK

SEAL = fresh_seal()


# Taken before any test runs: tests/conftest.py cheapens the parameters for each test.
REAL_HASHER = passwords._hasher  # noqa: SLF001


@pytest.fixture
def real_password_hashing(cheap_password_hashing: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """argon2-cffi's real parameters, which the two tests of the parameters check (the others
    here run with the cheap ones tests/conftest.py sets, as the rest of the suite does)."""
    monkeypatch.setattr(passwords, "_hasher", REAL_HASHER)


@pytest.mark.usefixtures("real_password_hashing")
def test_password_hash_is_argon2id_and_verifies() -> None:
    hashed = hash_password("correct horse")
    assert hashed.startswith("$argon2id$")
    assert "correct horse" not in hashed
    assert verify_password(hashed, "correct horse")
    assert not verify_password(hashed, "wrong horse")
    assert not verify_password("not-a-hash", "correct horse")
    assert not needs_rehash(hashed)


@pytest.mark.usefixtures("real_password_hashing")
def test_weak_old_hash_is_upgraded_on_login(engine: Engine) -> None:
    weak = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash("s3cret-pass")
    with session_scope(engine) as session:
        old = Operator(name="old", password_hash=weak)
        sign_row(SEAL, old)
        session.add(old)
    with session_scope(engine) as session:
        assert authenticate(session=session, name="old", password="s3cret-pass", seal=SEAL)
    with session_scope(engine, write=False) as session:
        stored = session.exec(select(Operator).where(Operator.name == "old")).one()
    assert stored.password_hash != weak
    assert verify_password(stored.password_hash, "s3cret-pass")
    # Signed anew with the new hash: it still logs in.
    with session_scope(engine) as session:
        assert authenticate(session=session, name="old", password="s3cret-pass", seal=SEAL)


def test_add_list_authenticate_remove(engine: Engine) -> None:
    with session_scope(engine) as session:
        add_operator(
            session=session, name="alice", password="long enough", seal=SEAL, roles=ROLE_BOOK
        )
        add_operator(
            session=session, name="bob", password="also long enough", seal=SEAL, roles=ROLE_BOOK
        )
    with session_scope(engine) as session:
        assert [o.name for o in list_operators(session=session, seal=SEAL)] == ["alice", "bob"]
        assert count_operators(session=session) == 2
        assert authenticate(session=session, name="alice", password="long enough", seal=SEAL)
        assert not authenticate(session=session, name="alice", password="long enougH", seal=SEAL)
        assert not authenticate(session=session, name="carol", password="long enough", seal=SEAL)
        token = start_session(session=session, operator="alice", ttl_s=60, seal=SEAL)
        assert remove_operator(session=session, name="alice")
        assert not remove_operator(session=session, name="alice")
        # Removing an operator logs them out everywhere.
        assert session_operator(session=session, token=token, seal=SEAL) is None
        assert [e.event for e in recent_events(session=session)][:1] == ["operator-removed"]


@pytest.mark.parametrize(
    ("name", "password", "message"),
    [
        ("alice", "short", "at least 8 characters"),
        ("", "long enough", "invalid operator name"),
        ("bad name", "long enough", "invalid operator name"),
        ("x" * 65, "long enough", "invalid operator name"),
    ],
)
def test_add_operator_refuses_with_a_clear_message(
    engine: Engine, name: str, password: str, message: str
) -> None:
    with pytest.raises(OperatorError, match=message), session_scope(engine) as session:
        add_operator(session=session, name=name, password=password, seal=SEAL, roles=ROLE_BOOK)


def test_duplicate_operator_is_refused(engine: Engine) -> None:
    with session_scope(engine) as session:
        add_operator(
            session=session, name="alice", password="long enough", seal=SEAL, roles=ROLE_BOOK
        )
    with pytest.raises(OperatorError, match="already exists"), session_scope(engine) as session:
        add_operator(
            session=session, name="alice", password="another one", seal=SEAL, roles=ROLE_BOOK
        )


def test_sessions_store_only_the_token_hash_and_expire(engine: Engine) -> None:
    with session_scope(engine) as session:
        add_operator(
            session=session, name="alice", password="long enough", seal=SEAL, roles=ROLE_BOOK
        )
        token = start_session(session=session, operator="alice", ttl_s=60, seal=SEAL)
    with session_scope(engine) as session:
        row = session.exec(select(OperatorSession)).one()
        assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
        assert token not in row.token_hash
        assert session_operator(session=session, token=token, seal=SEAL) == "alice"
        assert session_operator(session=session, token=token + "x", seal=SEAL) is None
        later = utcnow() + timedelta(seconds=61)
        assert session_operator(session=session, token=token, now=later, seal=SEAL) is None
        assert end_session(session=session, token=token)
        assert session_operator(session=session, token=token, seal=SEAL) is None


def test_meta_values(engine: Engine) -> None:
    with session_scope(engine) as session:
        assert get_meta(session=session, key="setup") is None
        set_meta(session=session, key="setup", value="a")
        set_meta(session=session, key="setup", value="b")
        assert get_meta(session=session, key="setup") == "b"
        assert delete_meta(session=session, key="setup")
        assert not delete_meta(session=session, key="setup")


def test_an_operator_row_inserted_by_sql_counts_as_absent(engine: Engine) -> None:
    with session_scope(engine) as session:
        add_operator(
            session=session, name="alice", password="long enough", seal=SEAL, roles=ROLE_BOOK
        )
        # What a database writer can do: a row with a hash of a password they know.
        session.add(Operator(name="mallory", password_hash=hash_password("long enough")))
    with session_scope(engine) as session:
        assert not authenticate(session=session, name="mallory", password="long enough", seal=SEAL)
        assert operator_role(session=session, name="mallory", seal=SEAL) is None
        listed = {o.name: o.signed for o in list_operators(session=session, seal=SEAL)}
        assert listed == {"alice": True, "mallory": False}
        # A signature copied from another row covers that row's name, not this one.
        mallory = session.exec(select(Operator).where(Operator.name == "mallory")).one()
        alice = session.exec(select(Operator).where(Operator.name == "alice")).one()
        mallory.signature = alice.signature
        session.add(mallory)
    with session_scope(engine) as session:
        assert not authenticate(session=session, name="mallory", password="long enough", seal=SEAL)


def test_a_role_or_hash_changed_by_sql_makes_the_operator_absent(engine: Engine) -> None:
    with session_scope(engine) as session:
        add_operator(
            session=session, name="alice", password="long enough", seal=SEAL, roles=ROLE_BOOK
        )
        add_operator(
            session=session,
            name="vic",
            password="long enough",
            roles=ROLE_BOOK.giving("viewer"),
            seal=SEAL,
        )
    with session_scope(engine) as session:
        vic = session.exec(select(Operator).where(Operator.name == "vic")).one()
        vic.role = "admin"
        alice = session.exec(select(Operator).where(Operator.name == "alice")).one()
        alice.password_hash = hash_password("attacker's own")
        session.add_all([vic, alice])
    with session_scope(engine) as session:
        assert operator_role(session=session, name="vic", seal=SEAL) is None
        assert not authenticate(session=session, name="alice", password="attacker's own", seal=SEAL)


def test_role_and_password_changes_are_signed_and_audited(engine: Engine) -> None:
    with session_scope(engine) as session:
        add_operator(
            session=session, name="alice", password="long enough", seal=SEAL, roles=ROLE_BOOK
        )
        add_operator(
            session=session, name="bob", password="long enough", seal=SEAL, roles=ROLE_BOOK
        )
        token = start_session(session=session, operator="bob", ttl_s=60, seal=SEAL)
    with session_scope(engine) as session:
        set_role(
            session=session, name="bob", role="viewer", seal=SEAL, actor="alice", roles=ROLE_BOOK
        )
        set_password(session=session, name="bob", password="brand new one", seal=SEAL, actor="bob")
    with session_scope(engine) as session:
        assert operator_role(session=session, name="bob", seal=SEAL) == "viewer"
        assert authenticate(session=session, name="bob", password="brand new one", seal=SEAL)
        # A new password ends the sessions of whoever knew the old one.
        assert session_operator(session=session, token=token, seal=SEAL) is None
        events = [e.event for e in recent_events(session=session)]
        assert events[:2] == ["operator-password", "operator-role"]
        with pytest.raises(OperatorError, match="last admin"):
            set_role(
                session=session,
                name="alice",
                role="approver",
                seal=SEAL,
                actor="alice",
                roles=ROLE_BOOK,
            )


def test_a_session_row_inserted_by_sql_logs_no_one_in(engine: Engine) -> None:
    token = "a cookie the attacker chose"
    with session_scope(engine) as session:
        add_operator(
            session=session, name="alice", password="long enough", seal=SEAL, roles=ROLE_BOOK
        )
        session.add(
            OperatorSession(
                token_hash=hashlib.sha256(token.encode()).hexdigest(),
                operator="alice",
                expires_at=utcnow() + timedelta(days=1),
            )
        )
    with session_scope(engine) as session:
        assert session_operator(session=session, token=token, seal=SEAL) is None
        # A real session's signature, moved onto the attacker's row, covers another hash.
        real = start_session(session=session, operator="alice", ttl_s=60, seal=SEAL)
        rows = {r.token_hash: r for r in session.exec(select(OperatorSession)).all()}
        planted = rows[hashlib.sha256(token.encode()).hexdigest()]
        planted.signature = rows[hashlib.sha256(real.encode()).hexdigest()].signature
        session.add(planted)
    with session_scope(engine) as session:
        assert session_operator(session=session, token=token, seal=SEAL) is None
        assert session_operator(session=session, token=real, seal=SEAL) == "alice"


def test_a_forged_row_is_audited_once(engine: Engine) -> None:
    with session_scope(engine) as session:
        session.add(Operator(name="mallory", password_hash=hash_password("long enough")))
    first = fresh_seal()
    # The same process twice, then another process (a seal of its own): one event.
    for seal in (first, first, fresh_seal()):
        with session_scope(engine) as session:
            authenticate(session=session, name="mallory", password="long enough", seal=seal)
            record_forged(session=session, forged=seal.take_pending())
    with session_scope(engine) as session:
        forged = [e for e in recent_events(session=session) if e.event == FORGED_EVENT]
    assert len(forged) == 1
    assert forged[0].detail.startswith("operator mallory: its signature does not verify")
