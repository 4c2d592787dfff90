"""Operators (the humans who approve) and their login sessions."""

from __future__ import annotations

import functools
import hashlib
import re
import secrets
from datetime import datetime, timedelta

from sqlmodel import Session, col, delete, func, select

from webplatform.store.audit import record_event
from webplatform.store.meta import get_meta, set_meta
from webplatform.store.models import Operator, OperatorPublic, OperatorSession, Passkey, utcnow
from webplatform.store.passwords import hash_password, needs_rehash, verify_password

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
MIN_PASSWORD_LENGTH = 8
# What an operator may do (SPEC §11): admins also manage operators and agent tokens; a viewer
# sees everything and decides nothing.
ROLES = ("admin", "approver", "viewer")
DECIDING_ROLES = frozenset({"admin", "approver"})
# Set when the first operator is added and never cleared: first-run setup is over for good,
# even if every operator is removed later.
FIRST_OPERATOR_KEY = "operators.first_added_at"


@functools.cache
def _dummy_hash() -> str:
    # Verified against when the name is unknown, so a wrong name costs as long as a wrong
    # password (no telling which operator names exist). Built on first use, not at import.
    return hash_password("aat-no-such-operator")


class OperatorError(ValueError):
    """An operator could not be added or changed; the message says how to fix it."""


def add_operator(
    *, session: Session, name: str, password: str, actor: str = "cli", role: str | None = None
) -> Operator:
    """Create operator `name` with an argon2id hash of `password` and `role` (default:
    `admin` for the first operator, `approver` after).

    Raises OperatorError for a bad name or role, a password shorter than 8 characters, or a
    name that is taken.
    """
    if role is not None and role not in ROLES:
        raise OperatorError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    if not NAME_PATTERN.fullmatch(name):
        raise OperatorError(
            f"invalid operator name {name!r}: use 1-64 letters, digits, '.', '_', '@' or '-'"
        )
    if len(password) < MIN_PASSWORD_LENGTH:
        raise OperatorError(f"password too short: use at least {MIN_PASSWORD_LENGTH} characters")
    if session.exec(select(Operator).where(Operator.name == name)).first() is not None:
        raise OperatorError(f"operator {name!r} already exists: pick another name")
    if role is None:
        role = "admin" if count_operators(session=session) == 0 else "approver"
    operator = Operator(
        name=name, password_hash=hash_password(password), created_at=utcnow(), role=role
    )
    session.add(operator)
    session.flush()
    if get_meta(session=session, key=FIRST_OPERATOR_KEY) is None:
        set_meta(session=session, key=FIRST_OPERATOR_KEY, value=operator.created_at.isoformat())
    record_event(session=session, actor=actor, event="operator-added", detail=f"{name} ({role})")
    return operator


def list_operators(*, session: Session) -> list[OperatorPublic]:
    """Every operator, by name (never the hashes)."""
    rows = session.exec(select(Operator).order_by(col(Operator.name))).all()
    return [
        OperatorPublic(id=r.id or 0, name=r.name, created_at=r.created_at, role=r.role)
        for r in rows
    ]


def operator_role(*, session: Session, name: str) -> str | None:
    """The role of operator `name`, or None when there is no such operator."""
    row = session.exec(select(Operator.role).where(Operator.name == name)).first()
    return None if row is None else str(row)


def deciders(*, session: Session) -> list[str]:
    """The names of the operators who may approve (admins and approvers)."""
    stmt = select(Operator.name).where(col(Operator.role).in_(sorted(DECIDING_ROLES)))
    return [str(n) for n in session.exec(stmt).all()]


def count_operators(*, session: Session) -> int:
    """How many operators exist (0 means first-run setup is still open)."""
    return int(session.exec(select(func.count()).select_from(Operator)).one())


def ever_had_operators(*, session: Session) -> bool:
    """True once any operator has existed, even if all were removed since."""
    if get_meta(session=session, key=FIRST_OPERATOR_KEY) is not None:
        return True
    return count_operators(session=session) > 0


def remove_operator(*, session: Session, name: str, actor: str = "cli") -> bool:
    """Delete operator `name`, their passkeys, and log out all their sessions; False if there
    was none."""
    operator = session.exec(select(Operator).where(Operator.name == name)).first()
    if operator is None:
        return False
    session.delete(operator)
    session.exec(delete(OperatorSession).where(col(OperatorSession.operator) == name))
    session.exec(delete(Passkey).where(col(Passkey.operator) == name))
    record_event(session=session, actor=actor, event="operator-removed", detail=name)
    session.flush()
    return True


def authenticate(*, session: Session, name: str, password: str) -> bool:
    """True when `name` exists and `password` is theirs. Upgrades an outdated hash in place."""
    operator = session.exec(select(Operator).where(Operator.name == name)).first()
    if operator is None:
        verify_password(_dummy_hash(), password)
        return False
    if not verify_password(operator.password_hash, password):
        return False
    if needs_rehash(operator.password_hash):
        operator.password_hash = hash_password(password)
        session.add(operator)
        session.flush()
    return True


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def start_session(*, session: Session, operator: str, ttl_s: float) -> str:
    """Open a login session; returns the cookie token (only its sha256 is stored)."""
    token = secrets.token_urlsafe(32)
    now = utcnow()
    session.add(
        OperatorSession(
            token_hash=_token_hash(token),
            operator=operator,
            created_at=now,
            expires_at=now + timedelta(seconds=ttl_s),
            last_seen_at=now,
        )
    )
    session.flush()
    return token


def session_operator(
    *, session: Session, token: str, now: datetime | None = None, touch: bool = True
) -> str | None:
    """The operator logged in with `token`, or None if unknown or expired."""
    now = now or utcnow()
    row = session.get(OperatorSession, _token_hash(token))
    if row is None or row.expires_at <= now:
        return None
    if touch:
        row.last_seen_at = now
        session.add(row)
        session.flush()
    return row.operator


def end_session(*, session: Session, token: str) -> bool:
    """Log out `token`; True if it was a session."""
    row = session.get(OperatorSession, _token_hash(token))
    if row is None:
        return False
    session.delete(row)
    session.flush()
    return True


def prune_sessions(*, session: Session, now: datetime | None = None) -> int:
    """Delete expired sessions; returns how many."""
    stmt = delete(OperatorSession).where(col(OperatorSession.expires_at) <= (now or utcnow()))
    return int(session.exec(stmt).rowcount)
