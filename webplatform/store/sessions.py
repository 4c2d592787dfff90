"""Operators' login sessions: the cookie's token is kept only as its sha256, and each row is
signed by aat (`webplatform.store.seals`), so neither a leaked table nor an inserted row logs
anyone in."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlmodel import Session, col, delete

from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.door import Aggregate
from webplatform.store.models import OperatorSession, utcnow
from webplatform.store.operators import authenticate, find_operator
from webplatform.store.seals import RowSeal, row_holds, sign_row


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def start_session(*, session: Session, operator: str, ttl_s: float, seal: RowSeal) -> str:
    """Open a signed login session; returns the cookie token (only its sha256 is stored)."""
    token = secrets.token_urlsafe(32)
    now = utcnow()
    row = OperatorSession(
        token_hash=_token_hash(token),
        operator=operator,
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_s),
        last_seen_at=now,
    )
    sign_row(seal, row)
    session.add(row)
    session.flush()
    return token


def session_operator(
    *,
    session: Session,
    token: str,
    seal: RowSeal,
    now: datetime | None = None,
    touch: bool = True,
) -> str | None:
    """The operator logged in with `token`, or None: unknown, expired, a session row or an
    operator row whose signature does not verify, or a removed operator."""
    now = now or utcnow()
    row = session.get(OperatorSession, _token_hash(token))
    if row is None or row.expires_at <= now or not row_holds(seal, row):
        return None
    if find_operator(session=session, name=row.operator, seal=seal) is None:
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


class Sessions(Aggregate):
    """The operators' browser sessions, as `platform.sessions`."""

    def start(self, operator: str, ttl_s: float) -> str:
        """A new session for `operator`; its token, for the cookie."""
        seal = self.seal
        return self._write(
            lambda s: start_session(session=s, operator=operator, ttl_s=ttl_s, seal=seal)
        )

    def log_in(self, name: str, password: str, ttl_s: float, address: str | None) -> str | None:
        """A new session's token when `password` is `name`'s (a signed row only), else None;
        the login, or its failure, audited in the same transaction."""
        seal = self.seal

        def attempt(session: Session) -> str | None:
            if not authenticate(session=session, name=name, password=password, seal=seal):
                failed = AuditEntry(actor=name[:200] or "?", event="login-failed", address=address)
                record_event(session, failed)
                return None
            token = start_session(session=session, operator=name, ttl_s=ttl_s, seal=seal)
            record_event(session, AuditEntry(actor=name, event="login", address=address))
            return token

        return self._write(attempt)

    def end(self, token: str, entry: AuditEntry) -> None:
        """End the session `token` opened, and audit it as `entry`, together."""

        def end(session: Session) -> None:
            end_session(session=session, token=token)
            record_event(session, entry)

        self._write(end)

    def operator_of(self, token: str) -> str | None:
        """Whose session `token` is, without extending it (a read); None when none holds."""
        seal = self.seal
        return self._read(
            lambda s: session_operator(session=s, token=token, seal=seal, touch=False)
        )
