"""The rows behind agents that sign in through the browser (SPEC §18): registered clients,
authorization grants and their codes, refresh tokens.

Codes and refresh tokens are 256 random bits, stored as sha256 only (as agent tokens are,
`webplatform.store.agents`). A grant an operator allowed and every refresh token are signed
by aat (`webplatform.store.seals`): such a row makes an agent, so one written by SQL counts
as absent.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import TypeVar

from sqlmodel import Session, col, delete, select

from webplatform.store.agents import revoke_agent, token_hash
from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.door import Aggregate
from webplatform.store.models import OAuthClient, OAuthGrant, OAuthRefreshToken, utcnow
from webplatform.store.seals import RowSeal, row_holds, sign_row

CODE_PREFIX = "aatc_"
REFRESH_PREFIX = "aatr_"

_Signed = TypeVar("_Signed", OAuthGrant, OAuthRefreshToken)


class GrantError(ValueError):
    """An authorization request cannot be allowed; the message says why and what to do."""


def save_client(*, session: Session, client_id: str, info: str) -> None:
    """Keep a dynamically registered client's metadata (JSON)."""
    session.add(OAuthClient(client_id=client_id, info=info, created_at=utcnow()))
    session.flush()


def client_info(*, session: Session, client_id: str) -> str | None:
    """A registered client's metadata (JSON), or None."""
    stmt = select(OAuthClient.info).where(OAuthClient.client_id == client_id)
    return session.exec(stmt).first()


def open_grant(
    *, session: Session, client_id: str, client_name: str, params: str, ttl: timedelta
) -> str:
    """Record an authorization request waiting for an operator; returns its request id."""
    request_id = secrets.token_urlsafe(24)
    now = utcnow()
    session.add(
        OAuthGrant(
            request_id=request_id,
            client_id=client_id,
            client_name=client_name[:200],
            params=params,
            created_at=now,
            expires_at=now + ttl,
        )
    )
    session.flush()
    return request_id


def pending_grant(*, session: Session, request_id: str) -> OAuthGrant | None:
    """The authorization request `request_id` while it waits for an operator (not expired,
    not yet allowed), or None."""
    row = session.exec(select(OAuthGrant).where(OAuthGrant.request_id == request_id)).first()
    if row is None or row.code_hash is not None or row.expires_at <= utcnow():
        return None
    return row


def allow_grant(
    *, session: Session, request_id: str, agent: str, owner: str, seal: RowSeal, ttl: timedelta
) -> tuple[OAuthGrant, str]:
    """Allow request `request_id` for agent `agent` owned by `owner`: a code valid for `ttl`,
    returned once (only its hash is kept). GrantError if the request is not pending."""
    row = pending_grant(session=session, request_id=request_id)
    if row is None:
        raise GrantError(
            "this sign-in request is unknown, expired or already answered: "
            "start the sign-in again from the agent"
        )
    code = CODE_PREFIX + secrets.token_urlsafe(32)
    row.code_hash = token_hash(code)
    row.agent = agent
    row.owner = owner
    row.expires_at = utcnow() + ttl
    sign_row(seal, row)
    session.add(row)
    session.flush()
    return row, code


def drop_grant(*, session: Session, request_id: str) -> OAuthGrant | None:
    """Forget a pending request (the operator denied it); returns it, or None."""
    row = pending_grant(session=session, request_id=request_id)
    if row is not None:
        session.delete(row)
        session.flush()
    return row


def find_code(
    *, session: Session, code: str, seal: RowSeal, lock: bool = False
) -> OAuthGrant | None:
    """The signed grant whose code is `code`, used or not (the caller tells a replay), or None;
    `lock`: its row held until the transaction ends (`_mark_once`)."""
    return _find_signed(session, OAuthGrant, "code_hash", code, seal, lock=lock)


def use_code(*, session: Session, grant_id: int, seal: RowSeal) -> bool:
    """Mark the grant's code used, signing the change; False if it was used already."""
    return _mark_once(session, OAuthGrant, grant_id, "used_at", seal)


def add_refresh(*, session: Session, template: OAuthRefreshToken, seal: RowSeal) -> str:
    """Store a new refresh token like `template` (agent, client, resource, scopes, expiry);
    returns the token, shown once."""
    token = REFRESH_PREFIX + secrets.token_urlsafe(32)
    row = OAuthRefreshToken(
        token_hash=token_hash(token),
        agent=template.agent,
        client_id=template.client_id,
        resource=template.resource,
        scopes=template.scopes,
        created_at=utcnow(),
        expires_at=template.expires_at,
    )
    sign_row(seal, row)
    session.add(row)
    session.flush()
    return token


def find_refresh(
    *, session: Session, token: str, seal: RowSeal, lock: bool = False
) -> OAuthRefreshToken | None:
    """The signed refresh token row for `token` (rotated or not), or None; `lock`: its row
    held until the transaction ends (`_mark_once`)."""
    return _find_signed(session, OAuthRefreshToken, "token_hash", token, seal, lock=lock)


def rotate_refresh(*, session: Session, refresh_id: int, seal: RowSeal) -> bool:
    """Mark a refresh token used (rotated), signing the change; False if it was already."""
    return _mark_once(session, OAuthRefreshToken, refresh_id, "rotated_at", seal)


def _find_signed(
    session: Session, model: type[_Signed], column: str, secret: str, seal: RowSeal, *, lock: bool
) -> _Signed | None:
    """The row of `model` whose hashed `column` matches `secret`, if its signature verifies."""
    if not secret:
        return None
    stmt = select(model).where(getattr(model, column) == token_hash(secret))
    if lock:
        stmt = stmt.with_for_update()
    row = session.exec(stmt).first()
    if row is None or not row_holds(seal, row):
        return None
    return row


def _mark_once(
    session: Session, model: type[_Signed], row_id: int, column: str, seal: RowSeal
) -> bool:
    """Stamp the signed row's `column` with now and sign the change; False if it was set
    already (or the row is missing or forged).

    The row is read locked (`FOR UPDATE` on PostgreSQL; SQLite's write transaction holds
    the whole database): of two uses racing, the second reads the first's stamp and loses."""
    stmt = select(model).where(col(model.id) == row_id).with_for_update()
    row = session.exec(stmt).first()
    if row is None or getattr(row, column) is not None or not row_holds(seal, row):
        return False
    setattr(row, column, utcnow())
    sign_row(seal, row)
    session.add(row)
    session.flush()
    return True


def forget_refresh_tokens(*, session: Session, agent: str) -> int:
    """Delete every refresh token of `agent` (its family is revoked); returns how many."""
    rows = session.exec(select(OAuthRefreshToken).where(OAuthRefreshToken.agent == agent)).all()
    for row in rows:
        session.delete(row)
    session.flush()
    return len(rows)


def prune_expired(*, session: Session, now: datetime | None = None) -> int:
    """Delete sign-in requests and codes past their time and expired refresh tokens (an
    expired code or refresh token is refused anyway); returns how many rows."""
    now = now or utcnow()
    grants = session.exec(delete(OAuthGrant).where(col(OAuthGrant.expires_at) <= now))
    refresh = session.exec(
        delete(OAuthRefreshToken).where(col(OAuthRefreshToken.expires_at) <= now)
    )
    return int(grants.rowcount) + int(refresh.rowcount)


class SignIns(Aggregate):
    """Agents' browser sign-ins (clients, grants, codes, refresh tokens), as
    `platform.sign_ins`."""

    def pending(self, request_id: str) -> OAuthGrant | None:
        """The grant waiting for an operator (`pending_grant`), or None."""
        return self._read(lambda s: pending_grant(session=s, request_id=request_id))

    def client(self, client_id: str) -> str | None:
        """A registered client's information, as JSON, or None."""
        return self._read(lambda s: client_info(session=s, client_id=client_id))

    def register(self, client_id: str, info: str) -> None:
        """Keep a client's registration (`info`, JSON)."""
        self._write(lambda s: save_client(session=s, client_id=client_id, info=info))

    def open(self, client_id: str, client_name: str, params: str, ttl: timedelta) -> str:
        """A new grant waiting for an operator; its request id."""
        return self._write(
            lambda s: open_grant(
                session=s, client_id=client_id, client_name=client_name, params=params, ttl=ttl
            )
        )

    def revoke_family(self, agent: str, why: str) -> None:
        """Revoke agent `agent` and forget its refresh tokens, audited with `why`, together."""
        seal = self.seal

        def revoke(session: Session) -> None:
            revoke_agent(session=session, name=agent, seal=seal, actor="aat")
            forget_refresh_tokens(session=session, agent=agent)
            detail = f"{agent}: {why}"
            record_event(
                session, AuditEntry(actor="aat", event="agent-sign-in-revoked", detail=detail)
            )

        self._write(revoke)

    def code(self, code: str) -> OAuthGrant | None:
        """The allowed grant `code` names, locked for its exchange (`find_code`)."""
        seal = self.seal
        return self._write(lambda s: find_code(session=s, code=code, seal=seal, lock=True))
