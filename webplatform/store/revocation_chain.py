"""The revocation chain's rows: appended under a lock, read in order (SPEC §24).

`RevocationChain` is its store object: each method one transaction through the door.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import text
from sqlmodel import Session, col, func, select

from webplatform.store.door import Door
from webplatform.store.models import RevocationEntry

GENESIS = "0" * 64
Link = tuple[str, str, str]  # fingerprint, previous hash, hash


def link_hash(prev_hash: str, fingerprint: str) -> str:
    """An entry's hash: sha256 over the previous entry's hash and its fingerprint."""
    return hashlib.sha256(f"{prev_hash}\n{fingerprint}".encode("ascii")).hexdigest()


def entries(*, session: Session) -> list[RevocationEntry]:
    """Every entry, oldest first."""
    return list(session.exec(select(RevocationEntry).order_by(col(RevocationEntry.id))).all())


def newest(*, session: Session) -> tuple[int, str]:
    """(entries, the newest entry's hash): one cheap look at whether the chain changed."""
    count = session.exec(select(func.count()).select_from(RevocationEntry)).one()
    last = session.exec(
        select(RevocationEntry.hash).order_by(col(RevocationEntry.id).desc()).limit(1)
    ).first()
    return int(count), last or GENESIS


def append(*, session: Session, fingerprint: str) -> RevocationEntry:
    """Add `fingerprint` after the newest entry; concurrent appends take turns."""
    if session.get_bind().dialect.name == "postgresql":
        # One appender at a time across hosts, so no two entries name the same predecessor.
        session.connection().execute(text("LOCK TABLE revocation IN EXCLUSIVE MODE"))
    last = session.exec(
        select(RevocationEntry).order_by(col(RevocationEntry.id).desc()).limit(1)
    ).first()
    prev = last.hash if last is not None else GENESIS
    entry = RevocationEntry(
        fingerprint=fingerprint, prev_hash=prev, hash=link_hash(prev, fingerprint)
    )
    session.add(entry)
    session.flush()
    return entry


class RevocationChain:
    """The chain's named queries, each one transaction through `door` (`Platform.transact`)."""

    def __init__(self, door: Door) -> None:
        self._door = door

    def links(self) -> list[Link]:
        """Every entry as (fingerprint, previous hash, hash), oldest first."""
        return self._door(
            lambda s: [(e.fingerprint, e.prev_hash, e.hash) for e in entries(session=s)],
            write=False,
        )

    def newest(self) -> tuple[int, str]:
        """(entries, the newest entry's hash)."""
        return self._door(lambda s: newest(session=s), write=False)

    def append(self, fingerprint: str) -> None:
        """Add `fingerprint` at the end, in a transaction of its own."""
        self._door(lambda s: append(session=s, fingerprint=fingerprint))
