"""Operators' passkeys and the single-use WebAuthn challenges that prove them.

Only public keys are stored, each row signed by aat (`webplatform.store.seals`) over its
operator, credential id, public key and time added: a passkey row inserted or changed by SQL
counts as absent, so it can neither approve nor confirm a change. A challenge is taken
(deleted) by the first request that presents it, in one compare-and-delete, so a replayed
assertion finds nothing to match.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session, col, delete, select

from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.door import Aggregate
from webplatform.store.models import Passkey, WebauthnChallenge, utcnow
from webplatform.store.seals import RowSeal, revoke_row, row_holds, sign_row

MAX_LABEL = 100


def all_passkeys(*, session: Session, operator: str, seal: RowSeal) -> list[tuple[Passkey, bool]]:
    """Every passkey row of the operator, oldest first, each with whether it is signed."""
    stmt = select(Passkey).where(Passkey.operator == operator).order_by(col(Passkey.id))
    return [(row, row_holds(seal, row)) for row in session.exec(stmt).all()]


def list_passkeys(*, session: Session, operator: str, seal: RowSeal) -> list[Passkey]:
    """The operator's passkeys that count (signed rows), oldest first."""
    return [
        row for row, signed in all_passkeys(session=session, operator=operator, seal=seal) if signed
    ]


def has_passkey(*, session: Session, operator: str, seal: RowSeal) -> bool:
    """True when the operator has at least one passkey that counts."""
    return bool(list_passkeys(session=session, operator=operator, seal=seal))


def find_passkey(
    *, session: Session, operator: str, credential_id: str, seal: RowSeal
) -> Passkey | None:
    """The operator's signed passkey with this credential id, or None (someone else's, or an
    unsigned row, counts as none)."""
    stmt = select(Passkey).where(
        Passkey.operator == operator, Passkey.credential_id == credential_id
    )
    row = session.exec(stmt).first()
    return row if row is not None and row_holds(seal, row) else None


@dataclass(frozen=True)
class NewPasskey:
    """A verified registration: whose, the authenticator's credential id, public key and
    signature counter, the label the operator gave it, and the relying party (RP ID) it
    was made for."""

    operator: str
    credential_id: str
    public_key: str
    sign_count: int
    label: str
    rp_id: str = "localhost"


@dataclass(frozen=True)
class ChallengeFor:
    """What a WebAuthn challenge may be used for: this operator and purpose and, for a
    step-up, this job with these arguments (their digest)."""

    operator: str
    purpose: str
    job_id: int | None = None
    digest: str | None = None


def add_passkey(*, session: Session, new: NewPasskey, seal: RowSeal) -> Passkey:
    """Record a verified registration for its relying party, signed with `seal`, and
    audit it."""
    operator = new.operator
    passkey = Passkey(
        operator=operator,
        credential_id=new.credential_id,
        public_key=new.public_key,
        sign_count=new.sign_count,
        label=(new.label.strip() or "passkey")[:MAX_LABEL],
        created_at=utcnow(),
        rp_id=new.rp_id,
    )
    sign_row(seal, passkey)
    session.add(passkey)
    session.flush()
    record_event(
        session, AuditEntry(actor=operator, event="passkey-added", detail=f"passkey {passkey.id}")
    )
    return passkey


def remove_passkey(
    *, session: Session, operator: str, passkey_id: int, seal: RowSeal | None = None
) -> bool:
    """Delete one of the operator's passkeys; False if they have none with this id. With
    `seal`, the row is remembered as revoked (`seals.revoke_row`): put back, it is absent."""
    passkey = session.get(Passkey, passkey_id)
    if passkey is None or passkey.operator != operator:
        return False
    if seal is not None:
        revoke_row(seal, passkey)
    session.delete(passkey)
    record_event(
        session, AuditEntry(actor=operator, event="passkey-removed", detail=f"passkey {passkey_id}")
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


def issue_challenge(*, session: Session, challenge: str, bound: ChallengeFor, ttl_s: float) -> None:
    """Store a fresh challenge bound to (operator, purpose, job, digest); drop expired ones."""
    now = utcnow()
    session.exec(delete(WebauthnChallenge).where(col(WebauthnChallenge.expires_at) <= now))
    session.add(
        WebauthnChallenge(
            challenge=challenge,
            operator=bound.operator,
            purpose=bound.purpose,
            job_id=bound.job_id,
            digest=bound.digest,
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


class Passkeys(Aggregate):
    """The operators' passkeys and their WebAuthn challenges, as `platform.passkeys`."""

    def of(self, operator: str) -> list[Passkey]:
        """`operator`'s passkeys whose signature holds (`list_passkeys`)."""
        seal = self.seal
        return self._read(lambda s: list_passkeys(session=s, operator=operator, seal=seal))

    def all_of(self, operator: str) -> list[tuple[Passkey, bool]]:
        """Every passkey row of `operator`, with whether its signature holds."""
        seal = self.seal
        return self._read(lambda s: all_passkeys(session=s, operator=operator, seal=seal))

    def find(self, operator: str, credential_id: str) -> Passkey | None:
        """`operator`'s passkey with `credential_id`, when its signature holds."""
        seal = self.seal
        return self._read(
            lambda s: find_passkey(
                session=s, operator=operator, credential_id=credential_id, seal=seal
            )
        )

    def add(self, new: NewPasskey) -> Passkey:
        """Keep a newly registered passkey, signed."""
        seal = self.seal
        return self._write(lambda s: add_passkey(session=s, new=new, seal=seal))

    def remove(self, operator: str, passkey_id: int) -> bool:
        """Remove `operator`'s passkey `passkey_id`; False when there was none."""
        seal = self.seal
        return self._write(
            lambda s: remove_passkey(session=s, operator=operator, passkey_id=passkey_id, seal=seal)
        )

    def used(self, passkey_id: int, sign_count: int) -> None:
        """Record a passkey's use and its authenticator's new sign count."""
        self._write(lambda s: record_use(session=s, passkey_id=passkey_id, sign_count=sign_count))

    def issue_challenge(self, challenge: str, bound: ChallengeFor, ttl_s: float) -> None:
        """Keep a challenge, bound to what it will confirm, for `ttl_s` seconds."""
        self._write(
            lambda s: issue_challenge(session=s, challenge=challenge, bound=bound, ttl_s=ttl_s)
        )

    def take_challenge(self, challenge: str) -> WebauthnChallenge | None:
        """The challenge, used up (once), or None when unknown or expired."""
        return self._write(lambda s: take_challenge(session=s, challenge=challenge))
