"""The rules as kept (SPEC §16): made from a YAML or Cedar text after the checks, signed,
revoked signed, read back as the `RuleSet` in force, exported as `aat rules list` prints.

Who may make or revoke one (an admin, with a step-up) is checked by the caller; this module
records who did."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from webplatform.platform import Platform
from webplatform.store import rules as rule_rows
from webplatform.store.models import RuleRow
from webplatform.trust.authority import report_forged, seal_for
from webplatform.trust.rules import Condition, Rule, RuleError, RuleSet, check, parse_cedar
from webplatform.trust.rules import parse_yaml as parse_yaml_rules


@dataclass(frozen=True)
class Source:
    """A rules file's text, and whether it is Cedar (else the YAML form)."""

    text: str
    cedar: bool = False

    @classmethod
    def of_file(cls, name: str, text: str) -> Source:
        """The file's form by its name: `.cedar` is Cedar, anything else YAML."""
        return cls(text=text, cedar=name.endswith(".cedar"))


def parse(source: Source, platform: Platform, *, now: datetime | None = None) -> list[Rule]:
    """The rules `source` holds, each checked against the registry; RuleError otherwise."""
    now = now or datetime.now(UTC)
    rules = parse_cedar(source.text) if source.cedar else parse_yaml_rules(source.text, now=now)
    registry = platform.registry()
    for rule in rules:
        check(rule, registry, now=now, max_hours=platform.settings.rule_max_hours)
    return rules


def add(platform: Platform, rules: list[Rule], *, by: str) -> list[int]:
    """Keep `rules`, made by admin `by`, each signed, in one transaction; their ids."""
    seal = seal_for(platform)

    def write(session: Any) -> list[int]:
        rows = [
            rule_rows.add_rule(session=session, rule=_new_row(rule), by=by, seal=seal)
            for rule in rules
        ]
        return [row.id for row in rows if row.id is not None]

    return platform.transact(write)


def _new_row(rule: Rule) -> rule_rows.NewRule:
    return rule_rows.NewRule(
        effect=rule.effect,
        tool=rule.tool,
        action=rule.action,
        requester=rule.requester,
        args_json=json.dumps({name: cond.to_json() for name, cond in rule.args}),
        cedar=rule.cedar,
        expires_at=rule.expires_at,
        max_runs=rule.max_runs,
        note=rule.note,
    )


def revoke(platform: Platform, rule_id: int, *, by: str) -> None:
    """Revoke rule `rule_id`; RuleError when there is no such rule in force."""
    seal = seal_for(platform)
    row = platform.transact(
        lambda s: rule_rows.revoke_rule(session=s, rule_id=rule_id, by=by, seal=seal)
    )
    report_forged(platform)
    if row is None:
        raise RuleError(f"no rule {rule_id} to revoke: `aat rules list` shows the rules")


def in_force(platform: Platform, *, now: datetime | None = None) -> RuleSet:
    """The rules in force now, by id; a forged row is left out and reported once."""
    seal, now = seal_for(platform), now or datetime.now(UTC)
    rows = platform.transact(
        lambda s: rule_rows.rules_in_force(session=s, seal=seal, now=now), write=False
    )
    report_forged(platform)
    return RuleSet({str(row.id): _kept(row) for row in rows})


def _kept(row: RuleRow) -> Rule:
    """A signed row as the engine's rule: its Cedar text is what is matched."""
    args = json.loads(row.args_json or "{}")
    return Rule(
        effect=row.effect,  # type: ignore[arg-type]
        tool=row.tool,
        action=row.action,
        requester=row.requester,
        args=tuple((name, _condition(value)) for name, value in args.items()),
        expires_at=row.expires_at,
        max_runs=row.max_runs,
        note=row.note,
        written_cedar=row.cedar,
    )


def _condition(value: Any) -> Condition:
    if isinstance(value, dict) and "one_of" in value:
        return Condition("one_of", options=tuple(value["one_of"]))
    if isinstance(value, dict):
        return Condition("range", low=value.get("min"), high=value.get("max"))
    glob = isinstance(value, str) and "*" in value
    return Condition("glob" if glob else "equal", value=value)


def listing(platform: Platform) -> list[dict[str, Any]]:
    """Every rule as `aat rules list` and `export` print it (forged rows marked)."""
    seal = seal_for(platform)
    rows = platform.transact(lambda s: rule_rows.all_rules(session=s, seal=seal), write=False)
    report_forged(platform)
    return [_listed(row, signed) for row, signed in rows]


def _listed(row: RuleRow, signed: bool) -> dict[str, Any]:
    return {
        "id": row.id,
        "effect": row.effect,
        "tool": row.tool,
        "action": row.action,
        "requester": row.requester,
        "args": json.loads(row.args_json or "{}"),
        "expires_at": row.expires_at.isoformat() if row.expires_at else None,
        "max_runs": row.max_runs,
        "runs": row.runs,
        "created_by": row.created_by,
        "revoked": row.revoked_at is not None,
        "note": row.note,
        "cedar": row.cedar,
        "signed": signed,
    }
