"""Small named values kept in the database (e.g. the hashed one-time setup token)."""

from __future__ import annotations

from sqlmodel import Session

from webplatform.store.models import Meta


def get_meta(*, session: Session, key: str) -> str | None:
    """The value stored under `key`, or None."""
    row = session.get(Meta, key)
    return None if row is None else row.value


def set_meta(*, session: Session, key: str, value: str) -> None:
    """Store `value` under `key`, replacing any previous value."""
    row = session.get(Meta, key)
    if row is None:
        session.add(Meta(key=key, value=value))
    else:
        row.value = value
        session.add(row)
    session.flush()


def delete_meta(*, session: Session, key: str) -> bool:
    """Forget `key`; True if it was there."""
    row = session.get(Meta, key)
    if row is None:
        return False
    session.delete(row)
    session.flush()
    return True
