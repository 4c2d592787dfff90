"""Rules (SPEC §16): calls decided in advance, written in YAML or Cedar, matched by Cedar.

A rule's effect is `allow` (run without asking), `deny` (refused, naming the rule) or `ask`
(wait for an operator even when reversible). Its scope is a tool, optionally one action,
optionally one requester (an agent token's name), and conditions on the arguments.

- `parse_yaml(text)` / `parse_cedar(text)`: the rules a file holds, as `Rule`s, or a
  `RuleError` naming the line; `check(rule, registry, ...)` refuses what must not be made.
- `Rule.cedar`: every rule as one Cedar policy (`permit` for allow and ask, `forbid` for
  deny), with `@effect`, `@expires` and `@max_runs` annotations for what Cedar has no word for.
- `RuleSet(rules).match(call)`: the rules in force a call matches, combined (`deny` over
  `ask` over `allow`), evaluated by the `cedarpy` engine in one request.

This module is pure: which rules are in force (signed, not revoked, not expired, budget
left) is the store's and the caller's to say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from webplatform.config import Settings
from webplatform.registry import argmodel, yamldoc
from webplatform.registry.model import ActionSpec, ArgSpec, Registry, ToolSpec
from webplatform.registry.yamldoc import YamlDoc, YamlProblem
from webplatform.suggest import did_you_mean
from webplatform.trust.gate import is_irreversible
from webplatform.trust.policy import PEOPLE_NEEDED, people_needed, policy_for
from webplatform.trust.rule_values import (
    RULE_DECIMALS,
    RULE_NUMBER_LIMIT,
    cedar_encodable,
    cedar_string,
    cedar_value,
    is_glob,
    is_number,
    rule_number_problem,
)

Effect = Literal["allow", "deny", "ask"]
EFFECTS: tuple[Effect, ...] = ("allow", "deny", "ask")
# Stronger first: a call two rules match gets the stronger effect.
_STRENGTH = {"deny": 0, "ask": 1, "allow": 2}
# The principal of a call made without an agent token: only rules without a requester match.
LOCAL_PRINCIPAL = 'Local::"aat"'
_KEYS: tuple[str, ...] = ("effect", "tool", "action", "requester", "args", "expires_in")
_KEYS += ("expires_at", "max_runs", "note", "any")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class RuleError(ValueError):
    """A rule that cannot be made: one line saying where and how to fix it."""


@dataclass(frozen=True)
class Condition:
    """One argument's condition: `equal` (a value), `glob` (a pattern, see
    `rule_values.Glob`), `one_of` (values), or `range` (numeric bounds, either may be None)."""

    kind: Literal["equal", "glob", "one_of", "range"]
    value: Any = None
    options: tuple[Any, ...] = ()
    low: int | float | None = None
    high: int | float | None = None

    def to_json(self) -> Any:
        """The YAML form's value for this condition."""
        if self.kind in ("equal", "glob"):
            return self.value
        if self.kind == "one_of":
            return {"one_of": list(self.options)}
        bounds = {"min": self.low, "max": self.high}
        return {k: v for k, v in bounds.items() if v is not None}


@dataclass(frozen=True)
class Rule:
    """A rule as written: scope, conditions, expiry, budget; `cedar` is its policy text."""

    effect: Effect
    tool: str
    action: str | None = None
    requester: str | None = None
    args: tuple[tuple[str, Condition], ...] = ()
    expires_at: datetime | None = None
    max_runs: int | None = None
    note: str = ""
    any_args: bool = False
    # Set for a rule written in Cedar: its text as written (conditions kept verbatim).
    written_cedar: str = field(default="", compare=False)
    line: int | None = field(default=None, compare=False)

    @property
    def cedar(self) -> str:
        """This rule as one Cedar policy."""
        return self.written_cedar or to_cedar(self)

    def scope_json(self) -> dict[str, Any]:
        """The rule's fields as `aat rules list` and `export` print them."""
        return {
            "effect": self.effect,
            "tool": self.tool,
            "action": self.action,
            "requester": self.requester,
            "args": {name: cond.to_json() for name, cond in self.args},
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "max_runs": self.max_runs,
            "note": self.note,
        }


@dataclass(frozen=True)
class Call:
    """What a rule is matched against: arguments after defaults are filled in."""

    tool: str
    action: str
    requester: str | None
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Match:
    """The effect the rules in force give a call, and which rules (by key) gave it."""

    effect: Effect
    rules: tuple[str, ...]


def _condition_cedar(name: str, cond: Condition, effect: Effect) -> str:
    """One condition as Cedar. For deny and ask, a value the engine cannot hold exactly (in
    `context.opaque`, see rule_matching) satisfies it: such a rule fails toward asking."""
    ref = f"context.args[{cedar_string(name)}]"
    present = f"context.args has {cedar_string(name)}"
    if cond.kind == "equal":
        test = f"{ref} == {cedar_value(cond.value)}"
    elif cond.kind == "glob":
        # aat's glob (see rule_values.Glob), not Cedar's `like`, whose `*` crosses `@` and `,`:
        # the context lists, per argument, the rules' patterns its value matches.
        test = f"context.globs[{cedar_string(name)}].contains({cedar_string(str(cond.value))})"
    elif cond.kind == "one_of":
        test = f"[{', '.join(cedar_value(v) for v in cond.options)}].contains({ref})"
    else:
        bounds = []
        if cond.low is not None:
            bounds.append(f"{ref}.greaterThanOrEqual({cedar_value(cond.low)})")
        if cond.high is not None:
            bounds.append(f"{ref}.lessThanOrEqual({cedar_value(cond.high)})")
        test = " && ".join(bounds)
    if effect == "allow":
        return f"({present} && {test})"
    return f"(context.opaque.contains({cedar_string(name)}) || ({present} && {test}))"


def to_cedar(rule: Rule) -> str:
    """The Cedar policy a YAML rule compiles to."""
    notes = [f"@effect({cedar_string(rule.effect)})"]
    if rule.expires_at is not None:
        notes.append(f"@expires({cedar_string(_iso(rule.expires_at))})")
    if rule.max_runs is not None:
        notes.append(f"@max_runs({cedar_string(str(rule.max_runs))})")
    principal = "principal"
    if rule.requester is not None:
        principal = f"principal == Agent::{cedar_string(rule.requester)}"
    action = "action"
    if rule.action is not None:
        action = f"action == Action::{cedar_string(f'{rule.tool}/{rule.action}')}"
    resource = f"resource == Tool::{cedar_string(rule.tool)}"
    verb = "forbid" if rule.effect == "deny" else "permit"
    text = "\n".join(notes) + f"\n{verb}({principal}, {action}, {resource})"
    if rule.args:
        text += (
            "\nwhen { "
            + " && ".join(_condition_cedar(n, c, rule.effect) for n, c in rule.args)
            + " }"
        )
    return text + ";"


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the YAML form ------------------------------------------------------------------------


def parse_yaml(text: str, *, now: datetime | None = None) -> list[Rule]:
    """The rules of a YAML file (one mapping, or a list of them); RuleError names the line."""
    try:
        doc = yamldoc.parse_yaml(text)
    except YamlProblem as exc:
        raise RuleError(_at(exc.line, exc.message)) from None
    if doc.data is None or doc.data == []:
        raise RuleError("line 1: no rule here: write `- effect: allow` and its scope")
    now = now or datetime.now(UTC)
    if isinstance(doc.data, list):
        return [_yaml_rule(_Where(doc, (i,)), item, now) for i, item in enumerate(doc.data)]
    return [_yaml_rule(_Where(doc, ()), doc.data, now)]


@dataclass(frozen=True)
class _Where:
    """A place in the YAML document, for errors that name their line."""

    doc: YamlDoc
    path: tuple[str | int, ...]

    def line(self, *more: str | int) -> int | None:
        return self.doc.line(*self.path, *more)

    def error(self, message: str, *more: str | int) -> RuleError:
        return RuleError(_at(self.line(*more), message))


def _at(line: int | None, message: str) -> str:
    return f"line {line}: {message}" if line is not None else message


def _yaml_rule(where: _Where, item: Any, now: datetime) -> Rule:
    if not isinstance(item, dict):
        raise where.error("a rule is a mapping: `effect:`, `tool:`, and its scope")
    for key in item:
        if key not in _KEYS:
            hint = did_you_mean(str(key), _KEYS)
            fix = f"did you mean `{hint[0]}`?" if hint else f"use {', '.join(_KEYS)}"
            raise where.error(f"unknown key `{key}`: {fix}", str(key))
    effect = item.get("effect")
    if effect not in EFFECTS:
        raise where.error(f"`effect` is {effect!r}: use allow, deny or ask", "effect")
    tool = _name(where, item, "tool", required=True)
    assert tool is not None
    return Rule(
        effect=effect,
        tool=tool,
        action=_name(where, item, "action"),
        requester=_name(where, item, "requester"),
        args=_conditions(where, item.get("args")),
        expires_at=_expiry(where, item, now),
        max_runs=_max_runs(where, item.get("max_runs")),
        note=str(item.get("note") or "")[:500],
        any_args=item.get("any") is True,
        line=where.line(),
    )


def _name(where: _Where, item: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = item.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"`{key}` must be a name (a string)", key)
    return value.strip()


def _conditions(where: _Where, args: Any) -> tuple[tuple[str, Condition], ...]:
    if args is None:
        return ()
    if not isinstance(args, dict):
        raise where.error("`args` maps argument names to conditions", "args")
    return tuple((str(name), _condition(where, str(name), value)) for name, value in args.items())


def _condition(where: _Where, name: str, value: Any) -> Condition:
    if isinstance(value, dict):
        cond = _structured(where, name, value)
    elif isinstance(value, str) and is_glob(value):
        cond = Condition("glob", value=value)
    elif isinstance(value, (str, int, float, bool)):
        cond = Condition("equal", value=value)
    else:
        raise where.error(
            f"argument `{name}`: a condition is a string, a number, true/false, "
            "`{one_of: [...]}` or `{min: N, max: N}`",
            "args",
            name,
        )
    if (problem := condition_problem(cond)) is not None:
        raise where.error(f"argument `{name}`: {problem}", "args", name)
    return cond


def condition_problem(cond: Condition) -> str | None:
    """Why a condition's values cannot be compared exactly with a call's, in one line."""
    for value in (cond.value, *cond.options, cond.low, cond.high):
        if (problem := rule_number_problem(value)) is not None:
            return (
                f"{problem}: a rule's numbers have at most {RULE_DECIMALS} decimal places and "
                f"lie within ±{RULE_NUMBER_LIMIT:,.0f}"
            )
        if isinstance(value, str) and not cedar_encodable(value):
            return f"{value!r} holds a lone surrogate, which no call's text can"
    return None


def _structured(where: _Where, name: str, value: dict[str, Any]) -> Condition:
    if set(value) == {"one_of"} and isinstance(value["one_of"], list) and value["one_of"]:
        options = value["one_of"]
        if all(isinstance(v, (str, int, float, bool)) for v in options):
            return Condition("one_of", options=tuple(options))
    elif value and set(value) <= {"min", "max"}:
        low, high = value.get("min"), value.get("max")
        numbers = all(v is None or is_number(v) for v in (low, high))
        if numbers and (low is None or high is None or low <= high):
            return Condition("range", low=low, high=high)
    raise where.error(
        f"argument `{name}`: use `{{one_of: [a, b]}}` (strings, numbers or true/false) or "
        "bounds `{min: N, max: N}` with min <= max",
        "args",
        name,
    )


def _expiry(where: _Where, item: dict[str, Any], now: datetime) -> datetime | None:
    if "expires_in" in item and "expires_at" in item:
        raise where.error("give `expires_in` or `expires_at`, not both", "expires_at")
    if "expires_in" in item:
        return now + _duration(where, item["expires_in"])
    if "expires_at" not in item:
        return None
    raw = item["expires_at"]
    try:
        when = raw if isinstance(raw, datetime) else datetime.fromisoformat(str(raw))
    except ValueError:
        raise where.error(
            f"`expires_at` {raw!r} is not an ISO time (2026-12-01T18:00:00Z)", "expires_at"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _duration(where: _Where, raw: Any) -> timedelta:
    found = _DURATION.match(str(raw))
    if found is None or float(found.group(1)) <= 0:
        raise where.error(
            f"`expires_in` {raw!r} is not a duration: write 15m, 1h, 8h or 2d", "expires_in"
        )
    return timedelta(seconds=float(found.group(1)) * _UNITS[found.group(2)])


def _max_runs(where: _Where, raw: Any) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise where.error(f"`max_runs` is {raw!r}: use a whole number, 1 or more", "max_runs")
    return raw


# -- the Cedar form -----------------------------------------------------------------------


def parse_cedar(text: str) -> list[Rule]:
    """The rules of a Cedar file, one per policy; RuleError says what does not parse."""
    import cedarpy  # here, not at the top: see `RuleSet`

    try:
        parsed = json.loads(cedarpy.policies_to_json_str(text))
    except ValueError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        raise RuleError(f"{_cedar_line(text)}: the Cedar does not parse: {first}") from None
    policies = parsed.get("staticPolicies", {})
    if parsed.get("templates") or not policies:
        raise RuleError("line 1: write one or more Cedar policies (templates are not rules)")
    return [_cedar_rule(policy) for policy in policies.values()]


def _cedar_line(text: str) -> str:
    """`line N`, N where the first policy that does not parse on its own starts (the engine
    names no position)."""
    import cedarpy

    start = 0
    for chunk in text.split(";"):
        line = text.count("\n", 0, start) + 1 + (len(chunk) - len(chunk.lstrip("\n")))
        start += len(chunk) + 1
        if chunk.strip():
            try:
                cedarpy.policies_to_json_str(chunk + ";")
            except ValueError:
                return f"line {line}"
    return "line 1"


def _cedar_rule(policy: dict[str, Any]) -> Rule:
    notes = policy.get("annotations", {})
    effect = notes.get("effect") or ("deny" if policy["effect"] == "forbid" else "allow")
    if effect not in EFFECTS or (effect == "deny") != (policy["effect"] == "forbid"):
        raise RuleError(
            f"@effect({effect!r}) does not fit `{policy['effect']}`: forbid is deny; "
            "permit is allow or ask"
        )
    tool = _entity(policy, "resource", "Tool")
    if tool is None:
        raise RuleError('a Cedar rule names its tool: `resource == Tool::"NAME"`')
    action = _entity(policy, "action", "Action")
    if action is not None and not action.startswith(f"{tool}/"):
        raise RuleError(f'the action must be Action::"{tool}/ACTION" for Tool::"{tool}"')
    expires = notes.get("expires")
    runs = notes.get("max_runs")
    return Rule(
        effect=effect,
        tool=tool,
        action=action.split("/", 1)[1] if action else None,
        requester=_entity(policy, "principal", "Agent"),
        expires_at=_cedar_expiry(expires) if expires else None,
        max_runs=_cedar_runs(runs) if runs else None,
        note=str(notes.get("note", ""))[:500],
        any_args=notes.get("any") == "true",
        written_cedar=_policy_text(policy),
    )


def _entity(policy: dict[str, Any], slot: str, kind: str) -> str | None:
    scope = policy[slot]
    if scope.get("op") == "All":
        return None
    entity = scope.get("entity", {})
    if scope.get("op") != "==" or entity.get("type") != kind:
        raise RuleError(f'a Cedar rule\'s {slot} is `{slot}` or `{slot} == {kind}::"NAME"`')
    return str(entity["id"])


def _cedar_expiry(raw: str) -> datetime:
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise RuleError(f"@expires({raw!r}) is not an ISO time (2026-12-01T18:00:00Z)") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _cedar_runs(raw: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise RuleError(f"@max_runs({raw!r}): use a whole number, 1 or more")
    return int(raw)


def _policy_text(policy: dict[str, Any]) -> str:
    import cedarpy

    doc = {"staticPolicies": {"rule": policy}, "templates": {}, "templateLinks": []}
    return cedarpy.format_policies(cedarpy.policies_from_json_str(json.dumps(doc))).strip()


# -- what may be made ---------------------------------------------------------------------


def check(rule: Rule, registry: Registry, *, now: datetime, settings: Settings) -> None:
    """Raise RuleError (naming the rule's line) unless `rule` may be made now: its tool,
    action and arguments exist, its conditions fit their types, it compiles, and it can
    apply (an allow rule on an action that always asks, under the manifest and `settings`,
    never would)."""
    where = f"line {rule.line}: " if rule.line is not None else ""
    try:
        _check(rule, registry, now, settings)
        _check_text(rule)
        compile_problem = cedar_problem(rule.cedar)
        if compile_problem is not None:
            raise RuleError(f"its Cedar does not compile: {compile_problem}")
    except RuleError as exc:
        raise RuleError(f"{where}{exc}") from None


def cedar_problem(text: str) -> str | None:
    """Why `text` is not exactly one Cedar policy the engine reads, in one line; or None."""
    import cedarpy

    try:
        parsed = json.loads(cedarpy.policies_to_json_str(text))
    except ValueError as exc:
        return (str(exc).splitlines() or ["syntax error"])[0]
    if len(parsed.get("staticPolicies", {})) != 1 or parsed.get("templates"):
        return "a rule is exactly one policy"
    return None


def _check(rule: Rule, registry: Registry, now: datetime, settings: Settings) -> None:
    tool = registry.tools.get(rule.tool)
    if tool is None:
        raise RuleError(_unknown("tool", rule.tool, registry.tools))
    actions = _actions(rule, tool)
    if rule.effect == "allow":
        _check_allow(rule, tool, actions, now, settings)
    elif rule.expires_at is not None and rule.expires_at <= now:
        raise RuleError(f"it expired at {_iso(rule.expires_at)}: give a later expiry")
    for name, cond in rule.args:
        _check_argument(rule, tool, actions, name, cond)


def _check_text(rule: Rule) -> None:
    """Names and notes are stored as they are: no lone surrogate, no NUL (a database's text
    cannot hold it) in the requester or the note."""
    for key, text in (("requester", rule.requester), ("note", rule.note)):
        if text is not None and (not cedar_encodable(text) or "\x00" in text):
            raise RuleError(f"`{key}` holds a NUL or a lone surrogate: write it without")


def _unknown(kind: str, name: str, known: Iterable[str]) -> str:
    hint = did_you_mean(name, list(known))
    return f"no {kind} named {name!r}" + (f": did you mean {hint[0]!r}?" if hint else "")


def _actions(rule: Rule, tool: ToolSpec) -> Sequence[ActionSpec]:
    if rule.action is None:
        return tool.actions
    found = [a for a in tool.actions if a.name == rule.action]
    if not found:
        message = _unknown(f"action of {tool.name}", rule.action, [a.name for a in tool.actions])
        raise RuleError(message)
    return found


def _check_allow(
    rule: Rule, tool: ToolSpec, actions: Sequence[ActionSpec], now: datetime, settings: Settings
) -> None:
    max_hours = settings.rule_max_hours
    if rule.expires_at is None:
        raise RuleError("an allow rule needs an expiry: add `expires_in: 1h` (or expires_at)")
    if rule.expires_at <= now:
        raise RuleError(f"it expired at {_iso(rule.expires_at)}: give a later expiry")
    if rule.expires_at - now > timedelta(hours=max_hours):
        raise RuleError(
            f"an allow rule may last at most {max_hours:g} h (AAT_RULE_MAX_HOURS): "
            "give an earlier expiry"
        )
    if all(people_needed(policy_for(settings, action)) for action in actions):
        what = f"{tool.name} {rule.action}" if rule.action else f"every action of {tool.name}"
        raise RuleError(
            f"{what} {PEOPLE_NEEDED} (its manifest, AAT_APPROVALS_REQUIRED or "
            "AAT_SELF_APPROVAL): no rule can allow it"
        )
    unbounded = not rule.args or all(_matches_all(c) for _n, c in rule.args)
    if unbounded and not rule.any_args and any(is_irreversible(tool.name, a) for a in actions):
        raise RuleError(
            "this would allow every call of an irreversible action: add conditions on its "
            "arguments, or say `any: true` if that is what you mean"
        )


def _matches_all(cond: Condition) -> bool:
    return cond.kind == "glob" and set(str(cond.value)) <= {"*"}


def _check_argument(
    rule: Rule, tool: ToolSpec, actions: Sequence[ActionSpec], name: str, cond: Condition
) -> None:
    specs = [arg for action in actions for arg in action.args if arg.name == name]
    if not specs:
        known = {arg.name for action in actions for arg in action.args}
        where = f"{tool.name} {rule.action}" if rule.action else tool.name
        raise RuleError(_unknown(f"argument of {where}", name, known))
    for spec in specs:
        _check_type(spec, cond)


def _check_type(spec: ArgSpec, cond: Condition) -> None:
    values = list(cond.options) if cond.kind == "one_of" else [cond.value]
    problem = argmodel.condition_problem(spec, cond.kind, values)
    if problem:
        raise RuleError(problem)
