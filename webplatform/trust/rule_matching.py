"""The rules in force deciding a call (SPEC §16, §20): one Cedar request, read so that no
value and no rule can make a deny or an ask rule fall silent.

`RuleSet(rules).match(call)` is the effect the rules give `call` (`deny` over `ask` over
`allow`), or None. Cedar decides every rule it can evaluate; around it:

- a value the engine cannot hold exactly (NaN, a lone surrogate) is left out of
  `context.args` and named in `context.opaque`: a deny or ask rule written in YAML counts
  a condition on it as met; a rule written in Cedar that names it without reading
  `context.opaque` applies when deny or ask; an allow rule naming it never applies;
- a rule whose Cedar fails on this call, or does not compile at all, applies when it is a
  deny or ask rule whose scope (tool, action, requester) covers the call, and is skipped
  when it is an allow rule; either way it is kept in `faulted` for the audit trail;
- glob conditions are decided by aat's matcher (`rule_values.Glob`): the context's
  `globs[ARG]` lists the rules' patterns that argument's value matches.

The engine is imported only once there are rules: without any, `aat mcp` starts 25 ms
sooner and holds 4 MB less (its native library).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webplatform.trust.rule_values import UNREPRESENTABLE, Glob, cedar_string, engine_value
from webplatform.trust.rules import LOCAL_PRINCIPAL, Call, Match, Rule

# Stronger first: a call two rules match gets the stronger effect.
_STRENGTH = {"deny": 0, "ask": 1, "allow": 2}
_POLICY_ERROR = re.compile(r"policy `policy(\d+)`")


@dataclass(frozen=True)
class _Reading:
    """What aat reads of one rule's compiled Cedar: the arguments it names (None: it uses
    `context.args` as a whole, so any), its glob patterns as (argument, pattern), and whether
    it reads `context.opaque` itself."""

    names: frozenset[str] | None
    globs: tuple[tuple[str, str], ...]
    reads_opaque: bool

    def names_any(self, opaque: frozenset[str]) -> bool:
        """Whether this rule names one of the arguments in `opaque`."""
        return bool(opaque) and (
            self.names is None or self.reads_opaque or bool(opaque & self.names)
        )


class RuleSet:
    """The rules in force, by key (a rule's id), as one Cedar policy set."""

    def __init__(self, rules: Mapping[str, Rule]) -> None:
        self.rules = dict(rules)
        # Rules whose Cedar does not compile, with the engine's one line on why.
        self.broken: dict[str, str] = {}
        # Rules that could not be evaluated for some call (or do not compile): `take_faulted`.
        self.faulted: dict[str, str] = {}
        self._order: list[str] = []  # the policy set's `policyN` -> key
        self._reading: dict[str, _Reading] = {}
        self._globs: dict[str, dict[str, Glob]] = {}
        self.policies: Any = None
        if self.rules:
            self._build()
        self.faulted.update(self.broken)

    def _build(self) -> None:
        import cedarpy

        for key, rule in self.rules.items():
            try:
                parsed = json.loads(cedarpy.policies_to_json_str(rule.cedar))
            except ValueError as exc:
                self.broken[key] = (str(exc).splitlines() or ["syntax error"])[0]
                continue
            policies = list(parsed.get("staticPolicies", {}).values())
            if len(policies) != 1 or parsed.get("templates"):
                self.broken[key] = "a rule is exactly one policy"
                continue
            self._order.append(key)
            self._reading[key] = _read(policies[0])
            for name, pattern in self._reading[key].globs:
                self._globs.setdefault(name, {})[pattern] = Glob(pattern)
        if self._order:
            text = "\n".join(self.rules[key].cedar for key in self._order)
            self.policies = cedarpy.PolicySet.from_str(text)

    def match(self, call: Call) -> Match | None:
        """The effect the rules give `call`, or None when no rule matches it."""
        if not self.rules:
            return None
        context, opaque = self._context(call.args)
        hits, failed = self._evaluate(call, context)
        for key in [*failed, *self.broken]:
            if self._covers(key, call) and self.rules[key].effect != "allow":
                hits.add(key)
        for key in self._order:
            reading, allow = self._reading[key], self.rules[key].effect == "allow"
            if not reading.names_any(opaque):
                continue
            if allow:
                hits.discard(key)  # never allowed on a value the engine could not see
            elif not reading.reads_opaque and self._covers(key, call):
                hits.add(key)
        if not hits:
            return None
        effect = min((self.rules[k].effect for k in hits), key=_STRENGTH.__getitem__)
        chosen = tuple(k for k in self.rules if k in hits and self.rules[k].effect == effect)
        return Match(effect=effect, rules=chosen)

    def take_faulted(self) -> dict[str, str]:
        """The rules that could not be evaluated since the last call, with why (once each)."""
        taken = {k: v for k, v in self.faulted.items() if v}
        for key in taken:
            self.faulted[key] = ""  # reported: kept, so it is not reported again
        return taken

    def _evaluate(self, call: Call, context: dict[str, Any]) -> tuple[set[str], list[str]]:
        """The keys Cedar found satisfied, and those it could not evaluate."""
        if self.policies is None:
            return set(), []
        import cedarpy  # already loaded: the policies were made with it

        principal = f"Agent::{cedar_string(call.requester)}" if call.requester else None
        request = {
            "principal": principal or LOCAL_PRINCIPAL,
            "action": f"Action::{cedar_string(f'{call.tool}/{call.action}')}",
            "resource": f"Tool::{cedar_string(call.tool)}",
            "context": context,
        }
        result = cedarpy.is_authorized(request, self.policies, [])
        hits = {self._order[int(r.removeprefix("policy"))] for r in result.diagnostics.reasons}
        failed: list[str] = []
        for error in result.diagnostics.errors:
            keys = [self._order[int(m)] for m in _POLICY_ERROR.findall(error)]
            # No policy named: the request itself could not be built, nothing was evaluated.
            for key in keys or self._order:
                failed.append(key)
                self.faulted.setdefault(key, error.splitlines()[0] if error else "error")
        return hits, failed

    def _covers(self, key: str, call: Call) -> bool:
        """Whether rule `key`'s scope (tool, action, requester) covers `call`."""
        rule = self.rules[key]
        return (
            rule.tool == call.tool
            and rule.action in (None, call.action)
            and (rule.requester is None or rule.requester == call.requester)
        )

    def _context(self, args: Mapping[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
        """The Cedar context for `args`, and the names of the arguments it cannot hold."""
        held: dict[str, Any] = {}
        globs: dict[str, list[str]] = {}
        opaque = set()
        for name, value in args.items():
            seen = engine_value(value)
            if seen is UNREPRESENTABLE:
                opaque.add(name)
            elif seen is not None:
                held[name] = seen
                if isinstance(value, str):
                    patterns = self._globs.get(name, {})
                    globs[name] = [p for p, glob in patterns.items() if glob.matches(value)]
        context = {"args": held, "globs": globs, "opaque": sorted(opaque)}
        return context, frozenset(opaque)


def _read(policy: dict[str, Any]) -> _Reading:
    """The arguments a policy's conditions name and its glob patterns, from its JSON form."""
    found = _Found()
    found.walk(policy.get("conditions", []))
    names = None if found.whole else frozenset(found.names)
    return _Reading(names, tuple(found.globs), found.opaque)


class _Found:
    """What a walk of a policy's conditions found (see `_read`)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.globs: list[tuple[str, str]] = []
        self.whole = False  # `context.args` used as a whole (compared, passed on)
        self.opaque = False  # `context.opaque` read

    def walk(self, node: Any) -> None:
        if isinstance(node, list):
            for child in node:
                self.walk(child)
            return
        if not isinstance(node, dict):
            return
        if _is_context(node, "opaque"):
            self.opaque = True
            return
        if _is_context(node, "args", "globs") or node == {"Var": "context"}:
            self.whole = True
            return
        if (pattern := _glob_of(node)) is not None:
            self.globs.append(pattern)
        for op in (".", "has"):
            inner = node.get(op)
            if isinstance(inner, dict) and _is_context(inner.get("left"), "args", "globs"):
                self.names.add(str(inner.get("attr")))
                return
        for child in node.values():
            self.walk(child)


def _is_context(node: Any, *fields: str) -> bool:
    """Whether `node` is `context.FIELD` for one of `fields`."""
    if not isinstance(node, dict) or not isinstance(node.get("."), dict):
        return False
    inner = node["."]
    return inner.get("left") == {"Var": "context"} and inner.get("attr") in fields


def _glob_of(node: dict[str, Any]) -> tuple[str, str] | None:
    """(argument, pattern) for `context.globs[ARG].contains("PATTERN")`, else None."""
    contains = node.get("contains")
    if not isinstance(contains, dict):
        return None
    left, right = contains.get("left"), contains.get("right")
    if not (isinstance(left, dict) and isinstance(left.get("."), dict)):
        return None
    if not _is_context(left["."].get("left"), "globs"):
        return None
    value = right.get("Value") if isinstance(right, dict) else None
    return (str(left["."].get("attr")), value) if isinstance(value, str) else None
