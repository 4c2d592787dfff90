"""What each aggregate's store object holds: its platform's transaction door and its seal.

A store object (`Operators`, `Tokens`, `Rules`, `SignIns`, `Jobs`, ...) is built once per
`Platform` and reached as `platform.operators`, `platform.jobs`, ...; its methods are the
named queries of one aggregate, each one transaction through the door (`Platform.transact`,
which retries a locked SQLite database). The seal (`webplatform.store.seals.RowSeal`) is
asked for only when a method reads or writes a sealed row, because making it the first time
signs the rows from before signatures (`webplatform.trust.authority.seal_for`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlmodel import Session

if TYPE_CHECKING:
    from webplatform.store.seals import RowSeal

T = TypeVar("T")


# PostgreSQL's code for a session it ended because it sat idle inside a transaction past
# `idle_in_transaction_session_timeout` (the process was frozen): the connection is gone.
_IDLE_IN_TRANSACTION_ENDED = "25P03"


def unreachable(exc: BaseException) -> bool:
    """True when `exc` says the database could not be reached or the link to it broke (a
    connection cut, a server restarting, a session ended for idling inside a transaction),
    as opposed to a refusal of what was asked."""
    if isinstance(exc, OperationalError):
        return True
    orig = getattr(exc, "orig", None) if isinstance(exc, DBAPIError) else None
    return getattr(orig, "sqlstate", None) == _IDLE_IN_TRANSACTION_ENDED


class Door(Protocol):
    """`Platform.transact`: run `fn(session)` in one transaction and return its result."""

    def __call__(self, fn: Callable[[Session], T], *, write: bool = True) -> T:
        """Run `fn` in one transaction (`write=False` for a read)."""
        ...


class Aggregate:
    """The base of the store objects: the door, and the seal made on first use."""

    def __init__(self, door: Door, seal: Callable[[], RowSeal]) -> None:
        self._door = door
        self._seal = seal

    @property
    def seal(self) -> RowSeal:
        """This process's seal on authority rows (see `webplatform.store.seals`)."""
        return self._seal()

    def _read(self, fn: Callable[[Session], T]) -> T:
        return self._door(fn, write=False)

    def _write(self, fn: Callable[[Session], T]) -> T:
        return self._door(fn)

    def step(self, op: Callable[..., T], /, *, write: bool = True, **kwargs: Any) -> T:
        """Run `op(session=..., **kwargs)`, a step a layer above decides (a state move of
        `webplatform.jobs.states`, a lease's end, a rule's take, a sign-in's grant), in one
        transaction. The one door for a transaction composed above the store: no module
        outside it calls `Platform.transact` (a test in `tests/test_transactions.py`)."""
        return self._door(lambda s: op(session=s, **kwargs), write=write)
