"""Pinned definitions of upstream MCP servers' tools (SPEC §22): recorded when seen, held
until an admin accepts them, read back as what is offered.

A definition is recorded once per (server, tool, digest): the first sight of a tool, or of a
changed definition, adds a `held` row; accepting makes a server's held rows `accepted` and
the definitions they replace `replaced`, audited. An accepted row is signed with aat's seal
(`webplatform.store.seals`), and one replaced is revoked first: a row marked accepted by SQL,
or a replaced definition put back, counts as held, never as accepted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.audit_chain import lock_chain
from webplatform.store.door import Aggregate
from webplatform.store.models import ServerToolPin, utcnow
from webplatform.store.seals import RowSeal, revoke_row, row_holds, sign_row

HELD, ACCEPTED, REPLACED = "held", "accepted", "replaced"


@dataclass(frozen=True)
class Pins:
    """What the store says of every server's tools: per server, the accepted definitions
    (tool name -> (digest, definition)) and the tools held (new or changed, not accepted)."""

    accepted: dict[str, dict[str, tuple[str, dict[str, Any]]]]
    held: dict[str, tuple[str, ...]]


def record_seen(
    *, session: Session, server: str, seen: list[tuple[str, dict[str, Any]]]
) -> list[str]:
    """Record each (digest, definition) of `server`'s tools not seen before as held, and
    audit it; the names of the tools it held. Two listings of one server at once (a call's
    and a `list_changed`'s) are serialised by the audit chain's lock, taken before the read,
    so the second sees what the first recorded instead of inserting it again."""
    lock_chain(session)
    known = set(
        session.exec(
            select(ServerToolPin.tool, ServerToolPin.digest).where(ServerToolPin.server == server)
        ).all()
    )
    held: list[str] = []
    for digest, definition in seen:
        tool = str(definition.get("name"))
        if (tool, digest) in known:
            continue
        text = json.dumps(definition, sort_keys=True, ensure_ascii=False)
        session.add(ServerToolPin(server=server, tool=tool, digest=digest, definition_json=text))
        known.add((tool, digest))
        held.append(tool)
    if held:
        detail = f"server {server}: held until accepted: {', '.join(held)}"
        record_event(session, AuditEntry(actor="aat", event="server-tools-held", detail=detail))
    return held


def accept(
    *,
    session: Session,
    server: str,
    by: str,
    seal: RowSeal,
    only: frozenset[str] | None = None,
) -> list[str]:
    """Accept every held definition of `server` (with `only`, those whose digest it holds;
    the definitions they replace become `replaced`, revoked), signed and audited as `by`'s;
    the names of the tools accepted."""
    candidates = session.exec(
        select(ServerToolPin).where(
            ServerToolPin.server == server, col(ServerToolPin.state).in_((HELD, ACCEPTED))
        )
    ).all()
    # Held: new or changed, or marked accepted without aat's signature (by SQL).
    rows = [
        r
        for r in candidates
        if (r.state == HELD or not row_holds(seal, r)) and (only is None or r.digest in only)
    ]
    now = utcnow()
    for row in rows:
        for old in session.exec(
            select(ServerToolPin).where(
                ServerToolPin.server == server,
                ServerToolPin.tool == row.tool,
                ServerToolPin.state == ACCEPTED,
                ServerToolPin.id != row.id,
            )
        ).all():
            revoke_row(seal, old)  # put back by SQL, it does not count
            old.state = REPLACED
            session.add(old)
        row.state, row.accepted_by, row.accepted_at = ACCEPTED, by, now
        sign_row(seal, row)
        session.add(row)
    names = sorted({row.tool for row in rows})
    if names:
        detail = f"server {server}: accepted {', '.join(names)}"
        record_event(session, AuditEntry(actor=by, event="server-tools-accepted", detail=detail))
    return names


def pins(*, session: Session, seal: RowSeal) -> Pins:
    """Every server's accepted definitions (their signatures holding) and held tools (an
    accepted row whose signature does not hold among them)."""
    accepted: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {}
    held: dict[str, list[str]] = {}
    rows = session.exec(
        select(ServerToolPin)
        .where(col(ServerToolPin.state).in_((HELD, ACCEPTED)))
        .order_by(col(ServerToolPin.id))
    ).all()
    for row in rows:
        if row.state == ACCEPTED and row_holds(seal, row):
            definition = json.loads(row.definition_json)
            accepted.setdefault(row.server, {})[row.tool] = (row.digest, definition)
        else:
            held.setdefault(row.server, []).append(row.tool)
    return Pins(accepted, {k: tuple(dict.fromkeys(v)) for k, v in held.items()})


# Built once: every tool call of a process with servers configured reads it
# (`Platform.registry`), and building and compiling it each time was most of that read.
_STAMP = select(
    func.count(col(ServerToolPin.id)),
    func.max(col(ServerToolPin.id)),
    func.max(col(ServerToolPin.accepted_at)),
)


def stamp(*, session: Session) -> tuple[int, int, Any]:
    """Changes whenever a pin is recorded or accepted: (rows, last id, last acceptance)."""
    row = session.connection().execute(_STAMP).one()
    return (int(row[0] or 0), int(row[1] or 0), row[2])


def server_pins(*, session: Session, server: str) -> list[ServerToolPin]:
    """Every definition recorded for `server`, oldest first (for `aat servers show`)."""
    return list(
        session.exec(
            select(ServerToolPin)
            .where(ServerToolPin.server == server)
            .order_by(col(ServerToolPin.id))
        ).all()
    )


class ServerPins(Aggregate):
    """The pinned definitions of upstream servers' tools, as `platform.server_pins`: each
    method one transaction."""

    def record_seen(self, server: str, seen: list[tuple[str, dict[str, Any]]]) -> list[str]:
        """`record_seen` in one transaction; the tools it held."""
        return self._write(lambda s: record_seen(session=s, server=server, seen=seen))

    def accept(self, server: str, by: str, only: frozenset[str] | None = None) -> list[str]:
        """`accept` in one transaction; the tools accepted."""
        seal = self.seal
        return self._write(lambda s: accept(session=s, server=server, by=by, seal=seal, only=only))

    def pins(self) -> Pins:
        """Every server's accepted definitions (signed) and held tools."""
        seal = self.seal
        return self._read(lambda s: pins(session=s, seal=seal))

    def stamp(self) -> tuple[int, int, Any]:
        """What changes whenever a pin is recorded or accepted."""
        return self._read(lambda s: stamp(session=s))

    def of(self, server: str) -> list[ServerToolPin]:
        """Every definition recorded for `server`, oldest first."""
        return self._read(lambda s: server_pins(session=s, server=server))
