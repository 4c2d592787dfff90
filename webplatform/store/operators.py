"""Operators (the humans who approve): adding them, their roles and passwords, signing in.

Every operator row carries aat's signature (`webplatform.store.seals`) over its name, role
and password hash; the functions that read authority from a row (`find_operator`,
`authenticate`, `operator_role`, `deciders`) treat a row whose signature does not verify as
absent. Their login sessions are `webplatform.store.sessions`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from sqlmodel import Session, col, delete, func, select

from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.door import Aggregate, Door
from webplatform.store.meta import get_meta, set_meta
from webplatform.store.models import Operator, OperatorPublic, OperatorSession, Passkey, utcnow
from webplatform.store.passwords import hash_password, needs_rehash, verify_password
from webplatform.store.seals import RowSeal, revoke_row, row_holds, sign_row

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
MIN_PASSWORD_LENGTH = 8
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


def _check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise OperatorError(f"password too short: use at least {MIN_PASSWORD_LENGTH} characters")


@dataclass(frozen=True)
class RoleBook:
    """The roles an operator row may hold, as trust's table of permissions names them
    (`webplatform.trust.permissions.ROLE_BOOK`; the store sits a floor below and is handed
    it): `first` is the first operator's role, `later` a later one's, and one operator must
    always keep a role in `keep` (who may change who decides)."""

    roles: tuple[str, ...]
    first: str
    later: str
    keep: frozenset[str]

    def check(self, role: str) -> None:
        """Raise OperatorError unless `role` is one of the book's."""
        if role not in self.roles:
            raise OperatorError(f"unknown role {role!r}: use one of {', '.join(self.roles)}")

    def giving(self, role: str | None) -> RoleBook:
        """This book, where a new operator gets `role` (None: first or later as it says)."""
        if role is None:
            return self
        self.check(role)
        return replace(self, first=role, later=role)


def add_operator(
    *,
    session: Session,
    name: str,
    password: str,
    seal: RowSeal,
    roles: RoleBook,
    actor: str = "cli",
) -> Operator:
    """Create operator `name` with an argon2id hash of `password` and the role `roles` gives
    a new operator (`roles.first` for the first one, `roles.later` after; `roles.giving(role)`
    to name it), signed with `seal`.

    Raises OperatorError for a bad name, a password shorter than 8 characters, or a name
    that is taken.
    """
    if not NAME_PATTERN.fullmatch(name):
        raise OperatorError(
            f"invalid operator name {name!r}: use 1-64 letters, digits, '.', '_', '@' or '-'"
        )
    _check_password(password)
    if session.exec(select(Operator).where(Operator.name == name)).first() is not None:
        raise OperatorError(f"operator {name!r} already exists: pick another name")
    role = roles.first if count_operators(session=session) == 0 else roles.later
    operator = Operator(
        name=name, password_hash=hash_password(password), created_at=utcnow(), role=role
    )
    sign_row(seal, operator)
    session.add(operator)
    session.flush()
    if get_meta(session=session, key=FIRST_OPERATOR_KEY) is None:
        set_meta(session=session, key=FIRST_OPERATOR_KEY, value=operator.created_at.isoformat())
    record_event(
        session, AuditEntry(actor=actor, event="operator-added", detail=f"{name} ({role})")
    )
    return operator


def find_operator(*, session: Session, name: str, seal: RowSeal) -> Operator | None:
    """Operator `name` when their row carries a valid signature; None when there is no such
    row or it was added or changed outside aat (noted on `seal` for the audit trail)."""
    row = session.exec(select(Operator).where(Operator.name == name)).first()
    if row is None or not row_holds(seal, row):
        return None
    return row


def list_operators(*, session: Session, seal: RowSeal) -> list[OperatorPublic]:
    """Every operator row, by name (never the hashes), each saying whether it is signed."""
    rows = session.exec(select(Operator).order_by(col(Operator.name))).all()
    return [
        OperatorPublic(
            id=r.id or 0,
            name=r.name,
            created_at=r.created_at,
            role=r.role,
            signed=row_holds(seal, r),
        )
        for r in rows
    ]


def decider_role(*, session: Session, name: str, seal: RowSeal) -> str | None:
    """The role operator `name` decides with at decision time; None when there is no row at
    all (the job functions' own callers and tests). Raises OperatorError when the row exists
    but its signature does not verify: such an operator decides nothing."""
    row = session.exec(select(Operator).where(Operator.name == name)).first()
    if row is None:
        return None
    if not row_holds(seal, row):
        raise OperatorError(
            f"{name}'s operator record was added or changed outside aat (its signature does "
            f"not verify), so it decides nothing; re-add them with `aat operator add {name}`"
        )
    return row.role


def operator_role(*, session: Session, name: str, seal: RowSeal) -> str | None:
    """The role of operator `name`, or None when there is no such operator (or their row
    does not verify)."""
    row = find_operator(session=session, name=name, seal=seal)
    return None if row is None else row.role


def deciders(*, session: Session, seal: RowSeal, roles: Iterable[str]) -> list[str]:
    """The names of the operators whose role is one of `roles` (signed rows only): who may
    approve, with the roles `webplatform.trust.permissions` says approve."""
    stmt = select(Operator).where(col(Operator.role).in_(sorted(roles)))
    return [r.name for r in session.exec(stmt).all() if row_holds(seal, r)]


def count_operators(*, session: Session) -> int:
    """How many operator rows exist (0 means first-run setup is still open; any row, signed
    or not, keeps it closed)."""
    return int(session.exec(select(func.count()).select_from(Operator)).one())


def ever_had_operators(*, session: Session) -> bool:
    """True once any operator has existed, even if all were removed since."""
    if get_meta(session=session, key=FIRST_OPERATOR_KEY) is not None:
        return True
    return count_operators(session=session) > 0


def remove_operator(
    *, session: Session, name: str, actor: str = "cli", seal: RowSeal | None = None
) -> bool:
    """Delete operator `name`, their passkeys, and log out all their sessions; False if there
    was none. With `seal`, their rows are remembered as revoked (`seals.revoke_row`): put
    back by SQL, they are absent."""
    operator = session.exec(select(Operator).where(Operator.name == name)).first()
    if operator is None:
        return False
    if seal is not None:
        for row in [operator, *session.exec(select(Passkey).where(Passkey.operator == name))]:
            revoke_row(seal, row)
    session.delete(operator)
    session.exec(delete(OperatorSession).where(col(OperatorSession.operator) == name))
    session.exec(delete(Passkey).where(col(Passkey.operator) == name))
    record_event(session, AuditEntry(actor=actor, event="operator-removed", detail=name))
    session.flush()
    return True


def set_role(
    *, session: Session, name: str, role: str, seal: RowSeal, roles: RoleBook, actor: str
) -> None:
    """Give operator `name` the role `role`, signed anew. Raises OperatorError for a role not
    in `roles` or an unknown operator, or when no operator would keep a role in `roles.keep`."""
    roles.check(role)
    row = find_operator(session=session, name=name, seal=seal)
    if row is None:
        raise OperatorError(f"no operator {name!r}: `aat operator list` shows them")
    if row.role in roles.keep and role not in roles.keep:
        others = [r for r in _keepers(session, seal, roles) if r != name]
        if not others:
            raise OperatorError(
                f"{name} is the last {row.role}: make another operator {row.role} first"
            )
    revoke_row(seal, row)  # the earlier role, put back by SQL, counts as absent
    before, row.role, row.signed_at = row.role, role, utcnow()
    sign_row(seal, row)
    session.add(row)
    session.flush()
    record_event(
        session,
        AuditEntry(actor=actor, event="operator-role", detail=f"{name}: {before} -> {role}"),
    )


def _keepers(session: Session, seal: RowSeal, roles: RoleBook) -> list[str]:
    """The signed operators holding a role in `roles.keep`."""
    return deciders(session=session, seal=seal, roles=roles.keep)


def set_password(*, session: Session, name: str, password: str, seal: RowSeal, actor: str) -> None:
    """Replace operator `name`'s password (argon2id, signed anew) and end their sessions.
    Raises OperatorError for a short password or an unknown operator."""
    _check_password(password)
    row = find_operator(session=session, name=name, seal=seal)
    if row is None:
        raise OperatorError(f"no operator {name!r}: `aat operator list` shows them")
    revoke_row(seal, row)  # the old hash, put back by SQL, logs no one in
    row.password_hash = hash_password(password)
    sign_row(seal, row)
    session.add(row)
    # A changed password is how one locks out whoever learnt the old one: their sessions go.
    session.exec(delete(OperatorSession).where(col(OperatorSession.operator) == name))
    session.flush()
    record_event(session, AuditEntry(actor=actor, event="operator-password", detail=name))


def authenticate(*, session: Session, name: str, password: str, seal: RowSeal) -> bool:
    """True when `name` is a signed operator row and `password` is theirs. Upgrades an
    outdated hash in place (and signs the row anew)."""
    operator = find_operator(session=session, name=name, seal=seal)
    if operator is None:
        verify_password(_dummy_hash(), password)
        return False
    if not verify_password(operator.password_hash, password):
        return False
    if needs_rehash(operator.password_hash):
        operator.password_hash = hash_password(password)
        sign_row(seal, operator)
        session.add(operator)
        session.flush()
    return True


class Operators(Aggregate):
    """The operators, as `platform.operators`: each method one transaction, sealed rows
    read and written with this process's seal."""

    def __init__(self, door: Door, seal: Callable[[], RowSeal], roles: Callable[[], RoleBook]):
        super().__init__(door, seal)
        self._roles = roles

    def add(self, name: str, password: str, *, role: str | None = None) -> Operator:
        """Add operator `name` (`add_operator`, by the command line): as `role`, or None for
        the role the book gives a first or later operator."""
        seal, roles = self.seal, self._roles().giving(role)
        return self._write(
            lambda s: add_operator(session=s, name=name, password=password, seal=seal, roles=roles)
        )

    def by_name(self, name: str) -> Operator | None:
        """The operator's row when its signature holds (`find_operator`)."""
        seal = self.seal
        return self._read(lambda s: find_operator(session=s, name=name, seal=seal))

    def listed(self) -> list[OperatorPublic]:
        """Every operator, as pages and the command line list them."""
        seal = self.seal
        return self._read(lambda s: list_operators(session=s, seal=seal))

    def role_of(self, name: str) -> str | None:
        """The role of operator `name`, or None (`operator_role`)."""
        seal = self.seal
        return self._read(lambda s: operator_role(session=s, name=name, seal=seal))

    def count(self) -> int:
        """How many operators there are."""
        return self._read(lambda s: count_operators(session=s))

    def set_role(self, name: str, role: str, *, actor: str) -> None:
        """Give `name` the role `role`, audited as `actor`'s change."""
        seal, roles = self.seal, self._roles()
        self._write(
            lambda s: set_role(session=s, name=name, role=role, seal=seal, roles=roles, actor=actor)
        )

    def set_password(self, name: str, password: str, *, actor: str) -> None:
        """Give `name` a new password, audited as `actor`'s change."""
        seal = self.seal
        self._write(
            lambda s: set_password(session=s, name=name, password=password, seal=seal, actor=actor)
        )

    def remove(self, name: str) -> bool:
        """Remove operator `name` (by the command line); False when there was none."""
        seal = self.seal
        return self._write(lambda s: remove_operator(session=s, name=name, seal=seal))

    def authenticate(self, name: str, password: str) -> bool:
        """True when `password` is `name`'s (a write: a stale hash is upgraded)."""
        seal = self.seal
        return self._write(
            lambda s: authenticate(session=s, name=name, password=password, seal=seal)
        )
