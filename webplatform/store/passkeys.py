"""Operators' passkeys and the single-use WebAuthn challenges that prove them.

Only public keys are stored. A challenge is taken (deleted) by the first request that
presents it, in one compare-and-delete, so a replayed assertion finds nothing to match.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session, col, delete, select

from webplatform.store.audit import record_event
from webplatform.store.models import Passkey, WebauthnChallenge, utcnow

MAX_LABEL = 100


def list_passkeys(*, session: Session, operator: str) -> list[Passkey]:
    """The operator's passkeys, oldest first."""
    stmt = select(Passkey).where(Passkey.operator == operator).order_by(col(Passkey.id))
    return list(session.exec(stmt).all())


def has_passkey(*, session: Session, operator: str) -> bool:
    """True when the operator has registered at least one passkey."""
    stmt = select(Passkey.id).where(Passkey.operator == operator).limit(1)
    return session.exec(stmt).first() is not None


def find_passkey(*, session: Session, operator: str, credential_id: str) -> Passkey | None:
    """The operator's passkey with this credential id, or None (someone else's counts as none)."""
    stmt = select(Passkey).where(
        Passkey.operator == operator, Passkey.credential_id == credential_id
    )
    return session.exec(stmt).first()


def add_passkey(
    *,
    session: Session,
    operator: str,
    credential_id: str,
    public_key: str,
    sign_count: int,
    label: str,
) -> Passkey:
    """Record a verified registration and audit it."""
    passkey = Passkey(
        operator=operator,
        credential_id=credential_id,
        public_key=public_key,
        sign_count=sign_count,
        label=(label.strip() or "passkey")[:MAX_LABEL],
        created_at=utcnow(),
    )
    session.add(passkey)
    session.flush()
    record_event(
        session=session, actor=operator, event="passkey-added", detail=f"passkey {passkey.id}"
    )
    return passkey


def remove_passkey(*, session: Session, operator: str, passkey_id: int) -> bool:
    """Delete one of the operator's passkeys; False if they have none with this id."""
    passkey = session.get(Passkey, passkey_id)
    if passkey is None or passkey.operator != operator:
        return False
    session.delete(passkey)
    record_event(
        session=session, actor=operator, event="passkey-removed", detail=f"passkey {passkey_id}"
    )
    session.flush()
    return True


def record_use(*, session: Session, passkey_id: int, sign_count: int) -> None:
    """Remember the authenticator's new signature counter after a verified assertion."""
    passkey = session.get(Passkey, passkey_id)
    if passkey is not None:
        passkey.sign_count = sign_count
        passkey.last_used_at = utcnow()
        session.add(passkey)
        session.flush()


def issue_challenge(
    *,
    session: Session,
    challenge: str,
    operator: str,
    purpose: str,
    ttl_s: float,
    job_id: int | None = None,
    digest: str | None = None,
) -> None:
    """Store a fresh challenge bound to (operator, purpose, job, digest); drop expired ones."""
    now = utcnow()
    session.exec(delete(WebauthnChallenge).where(col(WebauthnChallenge.expires_at) <= now))
    session.add(
        WebauthnChallenge(
            challenge=challenge,
            operator=operator,
            purpose=purpose,
            job_id=job_id,
            digest=digest,
            expires_at=now + timedelta(seconds=ttl_s),
        )
    )
    session.flush()


def take_challenge(
    *, session: Session, challenge: str, now: datetime | None = None
) -> WebauthnChallenge | None:
    """Consume a challenge: return it and delete it, or None if unknown, used or expired.

    Of two requests presenting the same challenge, only the one whose delete removed the
    row gets it back.
    """
    row = session.get(WebauthnChallenge, challenge)
    if row is None:
        return None
    taken = WebauthnChallenge(**row.model_dump())
    deleted = session.exec(
        delete(WebauthnChallenge).where(col(WebauthnChallenge.challenge) == challenge)
    ).rowcount
    session.flush()
    if deleted != 1 or taken.expires_at <= (now or utcnow()):
        return None
    return taken
