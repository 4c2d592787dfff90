"""Agent tokens: named bearer tokens MCP clients send to `/mcp`, stored as sha256 only.

Why sha256 and not argon2 (as for passwords): a token is 256 bits from `secrets`, so there is
nothing to guess and a slow hash buys no safety; a fast, unsalted hash can be looked up by an
index on every `/mcp` request, where argon2 would cost tens of milliseconds per request and
need the name sent beside the token.

Each row is signed by aat (`webplatform.store.seals`) over its name, owner, token hash and
whether it is revoked: a row inserted by SQL, or a revoked one set back to active, is no
agent (`/mcp` answers 401), though any row, signed or not, keeps `/mcp` closed.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime, timedelta

from sqlmodel import Session, col, func, select

from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.door import Aggregate
from webplatform.store.models import AgentToken, AgentTokenPublic, OAuthGrant, utcnow
from webplatform.store.operators import find_operator
from webplatform.store.seals import RowSeal, revoke_row, row_holds, sign_row

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
TOKEN_PREFIX = "aat_"
# `last_used_at` is written at most this often per token, so a busy agent does not turn every
# MCP request into a database write.
LAST_USED_RESOLUTION = timedelta(seconds=30)


class AgentTokenError(ValueError):
    """A token could not be minted or revoked; the message says how to fix it."""


def token_hash(token: str) -> str:
    """The stored form of a token: sha256 hex of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def add_agent(
    *, session: Session, name: str, owner: str | None, seal: RowSeal, actor: str = "cli"
) -> tuple[AgentTokenPublic, str]:
    """Mint token `name` for `owner`, signed with `seal`; returns the row and the token (shown
    once, never stored).

    Raises AgentTokenError for a bad or taken name (a revoked name stays taken, so history
    keeps meaning one agent) or an owner who is not an operator.
    """
    if not NAME_PATTERN.fullmatch(name):
        raise AgentTokenError(
            f"invalid agent name {name!r}: use 1-64 letters, digits, '.', '_', '@' or '-'"
        )
    if session.exec(select(AgentToken).where(AgentToken.name == name)).first() is not None:
        raise AgentTokenError(f"agent {name!r} already exists: pick another name")
    if owner and find_operator(session=session, name=owner, seal=seal) is None:
        raise AgentTokenError(
            f"no operator {owner!r} to own the token: `aat operator list` shows them"
        )
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = AgentToken(name=name, owner=owner, token_hash=token_hash(token), created_at=utcnow())
    sign_row(seal, row)
    session.add(row)
    session.flush()
    record_event(session, AuditEntry(actor=actor, event="agent-added", detail=name))
    return _public(row, signed=True), token


def list_agents(*, session: Session, seal: RowSeal) -> list[AgentTokenPublic]:
    """Every agent token, by name (never the hashes), each saying whether it is signed and,
    for an agent that signed in through the browser, the client it signed in with."""
    rows = session.exec(select(AgentToken).order_by(col(AgentToken.name))).all()
    grants = session.exec(
        select(OAuthGrant.agent, OAuthGrant.client_name)
        .where(col(OAuthGrant.used_at).is_not(None))
        .order_by(col(OAuthGrant.id))
    ).all()
    clients = {agent: name for agent, name in grants if agent}  # the latest grant wins
    return [
        _public(r, signed=row_holds(seal, r), client=clients.get(r.name) if r.resource else None)
        for r in rows
    ]


def revoke_agent(*, session: Session, name: str, seal: RowSeal, actor: str = "cli") -> bool:
    """Revoke token `name` (refused from the next request on), signing the revoked row;
    False if none is active."""
    row = session.exec(select(AgentToken).where(AgentToken.name == name)).first()
    if row is None or row.revoked_at is not None:
        return False
    revoke_row(seal, row)  # the active row, put back by SQL, counts as absent
    row.revoked_at = utcnow()
    # Signed as revoked: setting `revoked_at` back to NULL by SQL breaks the signature.
    sign_row(seal, row)
    session.add(row)
    session.flush()
    record_event(session, AuditEntry(actor=actor, event="agent-revoked", detail=name))
    return True


def rotate_agent_token(
    *, session: Session, name: str, seal: RowSeal, expires_at: datetime, resource: str
) -> str | None:
    """Give active agent `name` a fresh token valid until `expires_at` for `resource` (a
    signed-in agent's access token, SPEC §18); the old token stops working. Returns the new
    token (never stored), or None when the agent is revoked, unknown or its row unsigned."""
    row = session.exec(select(AgentToken).where(AgentToken.name == name)).first()
    if row is None or row.revoked_at is not None or not row_holds(seal, row):
        return None
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    revoke_row(seal, row)  # the old token's row, put back by SQL, counts as absent
    row.token_hash = token_hash(token)
    row.expires_at = expires_at
    row.resource = resource
    sign_row(seal, row)
    session.add(row)
    session.flush()
    return token


def agents_exist(*, session: Session) -> bool:
    """True once any agent token was minted (revoked ones count: `/mcp` stays closed)."""
    return int(session.exec(select(func.count()).select_from(AgentToken)).one()) > 0


def active_agents_exist(*, session: Session) -> bool:
    """True while at least one agent token is not revoked."""
    stmt = select(func.count()).select_from(AgentToken).where(col(AgentToken.revoked_at).is_(None))
    return int(session.exec(stmt).one()) > 0


def find_agent(*, session: Session, token: str, seal: RowSeal) -> AgentTokenPublic | None:
    """The active agent holding `token`, or None (unknown, revoked, expired, empty, or a row
    whose signature does not verify). Reads only."""
    if not token:
        return None
    stmt = select(AgentToken).where(AgentToken.token_hash == token_hash(token))
    row = session.exec(stmt).first()
    if row is None or row.revoked_at is not None or not row_holds(seal, row):
        return None
    if row.expires_at is not None and row.expires_at <= utcnow():
        return None
    return _public(row, signed=True)


def active_agent(*, session: Session, name: str, seal: RowSeal) -> AgentTokenPublic | None:
    """Agent `name` while it is not revoked and its row verifies, else None."""
    row = session.exec(select(AgentToken).where(AgentToken.name == name)).first()
    if row is None or row.revoked_at is not None or not row_holds(seal, row):
        return None
    return _public(row, signed=True)


def agent_owner(*, session: Session, name: str) -> str | None:
    """The operator agent token `name` acts for, or None (no owner, or no such token).

    Unchecked on purpose: it only narrows who may approve (self-approval), and the token
    that asked was checked, signature and all, when it asked."""
    row = session.exec(select(AgentToken.owner).where(AgentToken.name == name)).first()
    return None if row is None else row


def is_stale(agent: AgentTokenPublic, *, now: datetime | None = None) -> bool:
    """True when `agent`'s `last_used_at` is old enough to be worth a write."""
    last = agent.last_used_at
    return last is None or (now or utcnow()) - last >= LAST_USED_RESOLUTION


def touch_agent(*, session: Session, name: str, now: datetime | None = None) -> None:
    """Record that agent `name` was just used."""
    row = session.exec(select(AgentToken).where(AgentToken.name == name)).first()
    if row is not None:
        row.last_used_at = now or utcnow()
        session.add(row)
        session.flush()


def _public(row: AgentToken, *, signed: bool, client: str | None = None) -> AgentTokenPublic:
    # The columns the public model names, and only those: never the hash.
    columns = row.model_dump(include=set(AgentTokenPublic.model_fields) - {"signed", "client"})
    return AgentTokenPublic(**columns, signed=signed, client=client)


def name_taken(*, session: Session, name: str) -> bool:
    """True when a token row, signed or not, holds agent name `name`."""
    return session.exec(select(AgentToken.id).where(AgentToken.name == name)).first() is not None


class Tokens(Aggregate):
    """The agent tokens, as `platform.tokens`: each method one transaction."""

    def listed(self) -> list[AgentTokenPublic]:
        """Every token, as pages and the command line list them."""
        seal = self.seal
        return self._read(lambda s: list_agents(session=s, seal=seal))

    def mint(
        self, name: str, owner: str | None, *, actor: str = "cli"
    ) -> tuple[AgentTokenPublic, str]:
        """A new token for agent `name` (`add_agent`): its row and the token, shown once."""
        seal = self.seal
        return self._write(
            lambda s: add_agent(session=s, name=name, owner=owner, seal=seal, actor=actor)
        )

    def revoke(self, name: str, *, actor: str = "cli") -> bool:
        """Revoke agent `name`'s token; False when it had no active one."""
        seal = self.seal
        return self._write(lambda s: revoke_agent(session=s, name=name, seal=seal, actor=actor))

    def by_token(self, token: str) -> AgentTokenPublic | None:
        """The agent a bearer token names, when its row's signature holds (`find_agent`)."""
        seal = self.seal
        return self._read(lambda s: find_agent(session=s, token=token, seal=seal))

    def check(self, token: str, *, minted: bool) -> tuple[bool, AgentTokenPublic | None]:
        """(agent tokens exist, the agent holding `token` or None), in one read; `minted`
        (a token was once minted here) counts as tokens existing."""
        seal = self.seal

        def read(session: Session) -> tuple[bool, AgentTokenPublic | None]:
            exist = minted or agents_exist(session=session)
            found = find_agent(session=session, token=token, seal=seal) if exist else None
            return exist, found

        return self._read(read)

    def touch(self, name: str) -> None:
        """Note that agent `name` was just seen (`touch_agent`)."""
        self._write(lambda s: touch_agent(session=s, name=name))

    def any_active(self) -> bool:
        """True when some token is not revoked (`active_agents_exist`)."""
        return self._read(lambda s: active_agents_exist(session=s))
