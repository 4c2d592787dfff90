"""Operators: argon2id hashes, validation with clear messages, sessions by token hash."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from argon2 import PasswordHasher
from sqlalchemy import Engine
from sqlmodel import select

from webplatform.store import Operator, OperatorSession, session_scope, utcnow
from webplatform.store.audit import recent_events
from webplatform.store.meta import delete_meta, get_meta, set_meta
from webplatform.store.operators import (
    OperatorError,
    add_operator,
    authenticate,
    count_operators,
    end_session,
    list_operators,
    remove_operator,
    session_operator,
    start_session,
)
from webplatform.store.passwords import hash_password, needs_rehash, verify_password


@pytest.fixture(autouse=True)
def cheap_password_hashing() -> None:
    """Here argon2-cffi's real parameters are under test (tests/conftest.py cheapens them)."""


def test_password_hash_is_argon2id_and_verifies() -> None:
    hashed = hash_password("correct horse")
    assert hashed.startswith("$argon2id$")
    assert "correct horse" not in hashed
    assert verify_password(hashed, "correct horse")
    assert not verify_password(hashed, "wrong horse")
    assert not verify_password("not-a-hash", "correct horse")
    assert not needs_rehash(hashed)


def test_weak_old_hash_is_upgraded_on_login(engine: Engine) -> None:
    weak = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash("s3cret-pass")
    with session_scope(engine) as session:
        session.add(Operator(name="old", password_hash=weak))
    with session_scope(engine) as session:
        assert authenticate(session=session, name="old", password="s3cret-pass")
    with session_scope(engine, write=False) as session:
        stored = session.exec(select(Operator).where(Operator.name == "old")).one()
    assert stored.password_hash != weak
    assert verify_password(stored.password_hash, "s3cret-pass")


def test_add_list_authenticate_remove(engine: Engine) -> None:
    with session_scope(engine) as session:
        add_operator(session=session, name="alice", password="long enough")
        add_operator(session=session, name="bob", password="also long enough")
    with session_scope(engine) as session:
        assert [o.name for o in list_operators(session=session)] == ["alice", "bob"]
        assert count_operators(session=session) == 2
        assert authenticate(session=session, name="alice", password="long enough")
        assert not authenticate(session=session, name="alice", password="long enougH")
        assert not authenticate(session=session, name="carol", password="long enough")
        token = start_session(session=session, operator="alice", ttl_s=60)
        assert remove_operator(session=session, name="alice")
        assert not remove_operator(session=session, name="alice")
        # Removing an operator logs them out everywhere.
        assert session_operator(session=session, token=token) is None
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
        add_operator(session=session, name=name, password=password)


def test_duplicate_operator_is_refused(engine: Engine) -> None:
    with session_scope(engine) as session:
        add_operator(session=session, name="alice", password="long enough")
    with pytest.raises(OperatorError, match="already exists"), session_scope(engine) as session:
        add_operator(session=session, name="alice", password="another one")


def test_sessions_store_only_the_token_hash_and_expire(engine: Engine) -> None:
    with session_scope(engine) as session:
        token = start_session(session=session, operator="alice", ttl_s=60)
    with session_scope(engine) as session:
        row = session.exec(select(OperatorSession)).one()
        assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
        assert token not in row.token_hash
        assert session_operator(session=session, token=token) == "alice"
        assert session_operator(session=session, token=token + "x") is None
        later = utcnow() + timedelta(seconds=61)
        assert session_operator(session=session, token=token, now=later) is None
        assert end_session(session=session, token=token)
        assert session_operator(session=session, token=token) is None


def test_meta_values(engine: Engine) -> None:
    with session_scope(engine) as session:
        assert get_meta(session=session, key="setup") is None
        set_meta(session=session, key="setup", value="a")
        set_meta(session=session, key="setup", value="b")
        assert get_meta(session=session, key="setup") == "b"
        assert delete_meta(session=session, key="setup")
        assert not delete_meta(session=session, key="setup")
