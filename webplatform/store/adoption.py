"""Signing, once, the authority rows from before rows were signed (the SQL of
`webplatform.trust.authority.adopt_unsigned` and `adopt_unsigned_approvals`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session, col, delete, select

from webplatform.store import agents, operators, seals
from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.audit_chain import lock_chain
from webplatform.store.door import Aggregate
from webplatform.store.meta import get_meta, set_meta
from webplatform.store.models import (
    AgentToken,
    Job,
    JobApproval,
    JobState,
    Operator,
    OperatorSession,
    Passkey,
)
from webplatform.store.seals import RowSeal, SignedRow

ADOPTED_KEY = "authority.adopted_at"
ADOPTED_EVENT = "authority-adopted"
# The same, for the co-approvals and job policies signed since migration 0016.
APPROVALS_ADOPTED_KEY = "approvals.adopted_at"


def adopt_rows(session: Session, seal: RowSeal, now: str) -> tuple[bool, bool]:
    """Adopt (see `webplatform.trust.authority.adopt_unsigned`); returns whether operators
    and agent tokens existed."""
    lock_chain(session)  # serialises two processes adopting at once (PostgreSQL)
    existed = (
        operators.ever_had_operators(session=session),
        agents.agents_exist(session=session),
    )
    if get_meta(session=session, key=ADOPTED_KEY) is not None:
        return existed
    rows: list[Operator | Passkey | AgentToken] = [
        *session.exec(select(Operator).where(col(Operator.signature).is_(None))).all(),
        *session.exec(select(Passkey).where(col(Passkey.signature).is_(None))).all(),
        *session.exec(select(AgentToken).where(col(AgentToken.signature).is_(None))).all(),
    ]
    _sign_all(session, seal, rows)
    adopted = [_name(row) for row in rows]
    ended = session.exec(
        delete(OperatorSession).where(col(OperatorSession.signature).is_(None))
    ).rowcount
    _close(
        session,
        ADOPTED_KEY,
        now,
        f"signed the rows from before signatures: {', '.join(adopted) or 'none'}; "
        f"ended {ended} unsigned session(s)"
        if adopted or ended
        else None,
    )
    return existed


def _sign_all(session: Session, seal: RowSeal, rows: Sequence[SignedRow]) -> None:
    """Sign `rows` with `seal`, as aat's own from now on."""
    for row in rows:
        seals.sign_row(seal, row)
        session.add(row)


def _close(session: Session, key: str, now: str, detail: str | None) -> None:
    """Mark the adoption `key` done for good (at `now`), and audit what it signed (`detail`;
    None when it found nothing to sign)."""
    session.flush()
    set_meta(session=session, key=key, value=now)
    if detail is not None:
        record_event(session, AuditEntry(actor="system", event=ADOPTED_EVENT, detail=detail))


def _name(row: Operator | Passkey | AgentToken) -> str:
    if isinstance(row, Passkey):
        return f"passkey {row.id} of {row.operator}"
    return f"{'operator' if isinstance(row, Operator) else 'agent'} {row.name}"


def adopt_approvals(session: Session, seal: RowSeal, now: str) -> None:
    """Adopt approvals (see `webplatform.trust.authority.adopt_unsigned_approvals`)."""
    lock_chain(session)
    if get_meta(session=session, key=APPROVALS_ADOPTED_KEY) is not None:
        return
    waiting = (JobState.pending_approval, JobState.approved)
    jobs = session.exec(
        select(Job).where(col(Job.state).in_(waiting), col(Job.policy_signature).is_(None))
    ).all()
    for job in jobs:
        job.policy_signature = seals.seal_policy(seal, job)
        session.add(job)
    rows = session.exec(select(JobApproval).where(col(JobApproval.signature).is_(None))).all()
    _sign_all(session, seal, rows)
    _close(
        session,
        APPROVALS_ADOPTED_KEY,
        now,
        f"signed the policies of jobs {', '.join(str(j.id) for j in jobs) or 'none'} and "
        f"{len(rows)} approval(s) from before they were signed: "
        + (", ".join(seals.approval_name(r) for r in rows) or "none")
        if jobs or rows
        else None,
    )


class Adoption(Aggregate):
    """The one-time signing, as `platform.adoption`; the seal is given, since it is being
    made when these run (`webplatform.trust.authority.seal_for`)."""

    def rows(self, seal: RowSeal, now: str) -> tuple[bool, bool]:
        """`adopt_rows` in one transaction."""
        return self._write(lambda s: adopt_rows(s, seal, now))

    def approvals(self, seal: RowSeal, now: str) -> None:
        """`adopt_approvals` in one transaction."""
        self._write(lambda s: adopt_approvals(s, seal, now))
