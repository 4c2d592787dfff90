"""The rules as kept (SPEC §16): made from a YAML or Cedar text after the checks, signed,
revoked signed, read back as the `RuleSet` in force, exported as `aat rules list` prints.

Who may make or revoke one (an admin, with a step-up) is checked by the caller; this module
records who did."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from webplatform.platform import Platform
from webplatform.store import rules as rule_rows
from webplatform.store.clock import shared_now
from webplatform.store.models import RuleRow
from webplatform.trust.authority import report_forged
from webplatform.trust.rule_matching import RuleSet
from webplatform.trust.rule_values import glob_examples, is_glob
from webplatform.trust.rules import Call, Condition, Rule, RuleError, check, parse_cedar
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
    now = now or platform.jobs.now()  # the clock hosts share: a rule ends at once everywhere
    rules = parse_cedar(source.text) if source.cedar else parse_yaml_rules(source.text, now=now)
    registry = platform.registry()
    for rule in rules:
        check(rule, registry, now=now, settings=platform.settings)
    return rules


def add(platform: Platform, rules: list[Rule], *, by: str) -> list[int]:
    """Keep `rules`, made by admin `by`, each signed, in one transaction; their ids."""
    return platform.rules.add_all([_new_row(rule) for rule in rules], by)


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
    row = platform.rules.revoke(rule_id, by)
    report_forged(platform)
    if row is None:
        raise RuleError(f"no rule {rule_id} to revoke: `aat rules list` shows the rules")


class _Built:
    """The last rules in force this process built, under the ids and signatures of their
    rows: the same signed rows make the same policy set, and parsing a hundred rules' Cedar
    again each second cost the approvals page and every call's match a few milliseconds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: tuple[tuple[int | None, str | None], ...] | None = None
        self.rules = RuleSet({})


_built = _Built()


def in_force(platform: Platform, *, now: datetime | None = None) -> RuleSet:
    """The rules in force now, by id; a forged row is left out and reported once, and so is
    a rule that does not compile (applied when deny or ask, see `RuleSet`)."""
    rows = platform.rules.in_force(now)
    report_forged(platform)
    signed = tuple((row.id, row.signature) for row in rows)
    with _built.lock:
        if signed == _built.rows:
            return _built.rules
    rules = RuleSet({str(row.id): _kept(row) for row in rows})
    report_faults(platform, rules)
    with _built.lock:
        _built.rows, _built.rules = signed, rules
    return rules


def report_faults(platform: Platform, rules: RuleSet) -> None:
    """Audit, once, each rule of `rules` that could not be evaluated (or compiled)."""
    faulted = rules.take_faulted()
    if faulted:
        platform.rules.record_unusable(faulted)


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
    glob = isinstance(value, str) and is_glob(value)
    return Condition("glob" if glob else "equal", value=value)


def listing(platform: Platform) -> list[dict[str, Any]]:
    """Every rule as `aat rules list` and `export` print it (forged rows marked)."""
    rows, unusable = platform.rules.listed()
    report_forged(platform)
    return [_listed(row, signed, unusable.get(row.id or 0)) for row, signed in rows]


def _listed(row: RuleRow, signed: bool, unusable: str | None) -> dict[str, Any]:
    args = json.loads(row.args_json or "{}")
    examples = {
        name: glob_examples(value)
        for name, value in args.items()
        if isinstance(value, str) and is_glob(value)
    }
    return {
        "id": row.id,
        "effect": row.effect,
        "tool": row.tool,
        "action": row.action,
        "requester": row.requester,
        "args": args,
        "examples": examples,
        "unusable": unusable,
        "expires_at": row.expires_at.isoformat() if row.expires_at else None,
        "max_runs": row.max_runs,
        "runs": row.runs,
        "created_by": row.created_by,
        "revoked": row.revoked_at is not None,
        "note": row.note,
        "cedar": row.cedar,
        "signed": signed,
    }


@dataclass(frozen=True)
class RuleCheck:
    """What a worker checks of the rule a job was allowed by, just before it starts it."""

    rule_id: int
    tool: str
    action: str
    requester: str | None
    args: dict[str, Any]


def start_problem(platform: Platform, ask: RuleCheck, *, now: datetime | None = None) -> str | None:
    """None when rule `ask.rule_id` still allows this call and one run was taken from its
    budget; otherwise why the job must not start (forged, revoked, expired, spent, or no
    longer matching). The run is taken in the same transaction as the checks."""
    seal = platform.seal()

    def take(session: Any) -> str | None:
        row = rule_rows.find_rule(session=session, rule_id=ask.rule_id, seal=seal)
        if row is None:
            return f"rule {ask.rule_id} is missing or was changed outside aat"
        if (stale := _stale(row, now or shared_now(session))) is not None:
            return stale
        call = Call(ask.tool, ask.action, ask.requester, ask.args)
        found = RuleSet({str(row.id): _kept(row)}).match(call)
        # A rule that fails on this call allows nothing (its fault is audited where it is
        # matched for the call; here the job simply waits no more for it).
        if found is None or found.effect != "allow":
            return f"rule {ask.rule_id} does not allow this call"
        if not rule_rows.take_run(session=session, rule_id=ask.rule_id):
            return f"rule {ask.rule_id} has no runs left (max_runs {row.max_runs})"
        return None

    problem = platform.rules.step(take)
    report_forged(platform)
    return problem


def _stale(row: RuleRow, now: datetime) -> str | None:
    if row.revoked_at is not None:
        return f"rule {row.id} was revoked by {row.revoked_by}"
    if row.expires_at is not None and row.expires_at <= now:
        return f"rule {row.id} expired at {row.expires_at.isoformat(timespec='seconds')}"
    return None
