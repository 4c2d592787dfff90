"""Rule rows (SPEC §16): made and revoked signed, read back only when their signature holds,
and a run taken from a rule's budget by one compare-and-set, so two workers racing for a
rule's last run start it once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import update
from sqlmodel import Session, col, or_, select

from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.clock import shared_now
from webplatform.store.door import Aggregate
from webplatform.store.models import AuditEvent, RuleRow, utcnow
from webplatform.store.seals import RowSeal, revoke_row, row_holds, sign_row


@dataclass(frozen=True)
class NewRule:
    """What a new rule row holds, as checked and compiled above the store."""

    effect: str
    tool: str
    action: str | None
    requester: str | None
    args_json: str
    cedar: str
    expires_at: datetime | None
    max_runs: int | None
    note: str


def add_rule(*, session: Session, rule: NewRule, by: str, seal: RowSeal) -> RuleRow:
    """Insert `rule`, made by operator `by`, signed with `seal`, and audit it."""
    row = RuleRow(**rule.__dict__, created_by=by, created_at=utcnow())
    session.add(row)
    session.flush()  # the id is part of what is signed
    sign_row(seal, row)
    session.add(row)
    record_event(session, AuditEntry(actor=by, event="rule-added", detail=f"rule {row.id}"))
    return row


def all_rules(*, session: Session, seal: RowSeal) -> list[tuple[RuleRow, bool]]:
    """Every rule, newest first, each with whether its signature holds."""
    rows = session.exec(select(RuleRow).order_by(col(RuleRow.id).desc())).all()
    return [(row, row_holds(seal, row)) for row in rows]


def find_rule(*, session: Session, rule_id: int, seal: RowSeal) -> RuleRow | None:
    """Rule `rule_id` when its signature holds; None for a missing or forged row."""
    row = session.get(RuleRow, rule_id)
    return row if row is not None and row_holds(seal, row) else None


def in_force(row: RuleRow, now: datetime) -> bool:
    """Whether `row` (its signature checked) is in force at `now`: as `rules_in_force` reads."""
    return (
        row.revoked_at is None
        and (row.expires_at is None or row.expires_at > now)
        and (row.max_runs is None or row.runs < row.max_runs)
    )


def rules_in_force(*, session: Session, seal: RowSeal, now: datetime) -> list[RuleRow]:
    """Signed rules, not revoked, not expired, with budget left; oldest first."""
    stmt = (
        select(RuleRow)
        .where(col(RuleRow.revoked_at).is_(None))
        .where(or_(col(RuleRow.expires_at).is_(None), col(RuleRow.expires_at) > now))
        .where(or_(col(RuleRow.max_runs).is_(None), col(RuleRow.runs) < col(RuleRow.max_runs)))
        .order_by(col(RuleRow.id))
    )
    return [row for row in session.exec(stmt).all() if row_holds(seal, row)]


def revoke_rule(*, session: Session, rule_id: int, by: str, seal: RowSeal) -> RuleRow | None:
    """Revoke rule `rule_id` (re-signed as revoked); None when there is no such signed rule
    or it was already revoked."""
    row = find_rule(session=session, rule_id=rule_id, seal=seal)
    if row is None or row.revoked_at is not None:
        return None
    revoke_row(seal, row)  # the rule in force, put back by SQL, counts as absent
    row.revoked_at, row.revoked_by = utcnow(), by
    sign_row(seal, row)
    session.add(row)
    record_event(session, AuditEntry(actor=by, event="rule-revoked", detail=f"rule {rule_id}"))
    return row


def take_run(*, session: Session, rule_id: int) -> bool:
    """Count one run against rule `rule_id`'s budget; False when none is left (or the rule
    is revoked): one UPDATE, so of two racing callers for the last run only one gets True."""
    stmt = (
        update(RuleRow)
        .where(col(RuleRow.id) == rule_id)
        .where(col(RuleRow.revoked_at).is_(None))
        .where(or_(col(RuleRow.max_runs).is_(None), col(RuleRow.runs) < col(RuleRow.max_runs)))
        .values(runs=RuleRow.runs + 1)
    )
    return int(session.exec(stmt).rowcount) == 1


RULE_UNUSABLE = "rule-unusable"


def record_unusable(*, session: Session, faulted: dict[str, str]) -> None:
    """Audit each rule (by id) that could not be evaluated, with why, unless the trail
    already has it: a rule that fails on every call is recorded once, not once a call."""
    for key, why in faulted.items():
        seen = select(AuditEvent.id).where(
            AuditEvent.event == RULE_UNUSABLE, col(AuditEvent.detail).startswith(f"rule {key}:")
        )
        if session.exec(seen.limit(1)).first() is None:
            detail = f"rule {key}: could not be evaluated ({why[:300]}); deny and ask apply"
            record_event(session, AuditEntry(actor="system", event=RULE_UNUSABLE, detail=detail))


def unusable(*, session: Session) -> dict[int, str]:
    """The rules the audit trail records as not evaluated, by id, with the recorded line."""
    rows = session.exec(select(AuditEvent.detail).where(AuditEvent.event == RULE_UNUSABLE))
    found: dict[int, str] = {}
    for detail in rows:
        head, _, rest = (detail or "").partition(": ")
        if head.startswith("rule ") and head[5:].isdigit():
            found[int(head[5:])] = rest
    return found


def rule_row(*, session: Session, rule_id: int | None) -> RuleRow | None:
    """Rule `rule_id`'s row as it is, signed or not, or None."""
    return session.get(RuleRow, rule_id)


class Rules(Aggregate):
    """The rule rows, as `platform.rules`: each method one transaction."""

    def add_all(self, rules: list[NewRule], by: str) -> list[int]:
        """Keep `rules`, made by admin `by`, each signed, in one transaction; their ids."""
        seal = self.seal

        def write(session: Session) -> list[int]:
            rows = [add_rule(session=session, rule=rule, by=by, seal=seal) for rule in rules]
            return [row.id for row in rows if row.id is not None]

        return self._write(write)

    def listed(self) -> tuple[list[tuple[RuleRow, bool]], dict[int, str]]:
        """Every rule row with whether its signature holds, and the unusable ones' faults,
        in one read."""
        seal = self.seal
        return self._read(lambda s: (all_rules(session=s, seal=seal), unusable(session=s)))

    def by_id(self, rule_id: int) -> RuleRow | None:
        """Rule `rule_id` when its signature holds (`find_rule`)."""
        seal = self.seal
        return self._read(lambda s: find_rule(session=s, rule_id=rule_id, seal=seal))

    def in_force(self, now: datetime | None = None) -> list[RuleRow]:
        """The signed rules in force at `now` (None: now, by the clock hosts share)."""
        seal = self.seal
        return self._read(lambda s: rules_in_force(session=s, seal=seal, now=now or shared_now(s)))

    def revoke(self, rule_id: int, by: str) -> RuleRow | None:
        """Revoke rule `rule_id` in `by`'s name; the row, or None when none was in force."""
        seal = self.seal
        return self._write(lambda s: revoke_rule(session=s, rule_id=rule_id, by=by, seal=seal))

    def record_unusable(self, faulted: dict[str, str]) -> None:
        """Note the rules that could not be used, and why (`record_unusable`)."""
        self._write(lambda s: record_unusable(session=s, faulted=faulted))
