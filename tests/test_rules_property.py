"""The rules' decision through Cedar, compared with a reference evaluator of the YAML form
written plainly in Python (SPEC §16, §20), over generated rules and calls: huge and
negative integers, floats and decimals, NaN, non-ASCII and lone surrogates, empty strings,
arguments left out that have defaults, globs against addresses and paths.

Any disagreement is a bug in one of them. The reference says what the spec says, directly:
exact numbers, globs by recursion over the pattern, a value the engine cannot hold makes a
deny or ask rule that names it apply and an allow rule naming it not apply.
"""

from __future__ import annotations

import math
import unicodedata
from decimal import Decimal
from functools import cache
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webplatform.registry.model import ActionSpec, ArgSpec
from webplatform.registry.validation import with_defaults
from webplatform.trust.rule_matching import RuleSet
from webplatform.trust.rules import Call, Condition, Rule

# One action whose arguments cover every comparable type; two have defaults.
ACTION = ActionSpec(
    name="pay",
    args=(
        ArgSpec("amount", "number"),
        ArgSpec("count", "integer", default=3),
        ArgSpec("to", "string"),
        ArgSpec("path", "string", default="reports/q3.pdf"),
        ArgSpec("urgent", "boolean"),
    ),
)
NUMERIC = ("amount", "count")
TEXTUAL = ("to", "path")
STRENGTH = {"deny": 0, "ask": 1, "allow": 2}


# -- the reference ------------------------------------------------------------------------


def ref_unrepresentable(value: Any) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return True
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    return False


def ref_number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def ref_equal(constant: Any, value: Any) -> bool:
    if isinstance(constant, bool) or isinstance(value, bool):
        return isinstance(constant, bool) and isinstance(value, bool) and constant == value
    if isinstance(constant, str) or isinstance(value, str):
        return isinstance(constant, str) and isinstance(value, str) and constant == value
    number = ref_number(value)
    return number is not None and ref_number(constant) == number


def ref_segment_char(c: str) -> bool:
    return c not in "/@,;" and not c.isspace() and unicodedata.category(c) != "Cc"


def ref_line_char(c: str) -> bool:
    return unicodedata.category(c) != "Cc" and c not in "\u2028\u2029"


def ref_glob(pattern: str, value: str) -> bool:
    tokens: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i : i + 2] == "**":
            while i < len(pattern) and pattern[i] == "*":
                i += 1
            tokens.append("**")
        else:
            tokens.append(pattern[i])
            i += 1

    @cache
    def at(t: int, v: int) -> bool:
        if t == len(tokens):
            return v == len(value)
        token = tokens[t]
        if token in ("*", "**"):
            ok = ref_segment_char if token == "*" else ref_line_char
            return at(t + 1, v) or (v < len(value) and ok(value[v]) and at(t, v + 1))
        if v == len(value):
            return False
        if token == "?":
            return ref_segment_char(value[v]) and at(t + 1, v + 1)
        return value[v] == token and at(t + 1, v + 1)

    return at(0, 0)


def ref_condition(effect: str, cond: Condition, value: Any, given: bool) -> bool:
    if not given:
        return False
    if ref_unrepresentable(value):
        return effect != "allow"
    if cond.kind == "equal":
        return ref_equal(cond.value, value)
    if cond.kind == "one_of":
        return any(ref_equal(option, value) for option in cond.options)
    if cond.kind == "glob":
        return isinstance(value, str) and ref_glob(str(cond.value), value)
    number = ref_number(value)
    if number is None:
        return False
    low_ok = cond.low is None or number >= ref_number(cond.low)  # type: ignore[operator]
    return low_ok and (cond.high is None or number <= ref_number(cond.high))  # type: ignore[operator]


def ref_decide(rules: dict[str, Rule], call: Call) -> tuple[str, tuple[str, ...]] | None:
    hits = []
    for key, rule in rules.items():
        if rule.tool != call.tool or rule.action not in (None, call.action):
            continue
        if rule.requester is not None and rule.requester != call.requester:
            continue
        if all(
            ref_condition(rule.effect, cond, call.args.get(name), name in call.args)
            for name, cond in rule.args
        ):
            hits.append(key)
    if not hits:
        return None
    effect = min((rules[k].effect for k in hits), key=STRENGTH.__getitem__)
    return effect, tuple(k for k in hits if rules[k].effect == effect)


# -- what is generated --------------------------------------------------------------------

# Characters that make globs interesting: separators, spaces, line breaks, accents, a bidi
# mark, NUL, and the wildcards' own characters as plain text in values.
ALPHABET = list("ab.@/,; -_x") + ["\n", "\t", "\u2028", "é", "\u202e", "\x00", "*", "?"]
rule_numbers = st.one_of(
    st.integers(min_value=-(10**14), max_value=10**14),
    st.decimals(min_value=-(10**6), max_value=10**6, places=3).map(float),
    st.sampled_from([0, 1000, 100, -1, 0.5, 99.999]),
)


def call_numbers(near: list[Any]) -> st.SearchStrategy[Any]:
    offsets = st.sampled_from([0, 1e-5, -1e-5, 0.0005, 1, -1])
    close = (
        st.sampled_from(near).flatmap(lambda n: offsets.map(lambda d: n + d))
        if near
        else st.just(0)
    )
    return st.one_of(
        close,
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=True, allow_infinity=False),
        st.sampled_from([10**15, -(10**15), 1e300, -1e300, float("nan"), 100.00004]),
    )


texts = st.text(alphabet=st.sampled_from(ALPHABET), max_size=8)
odd_texts = st.text(
    alphabet=st.characters(exclude_categories=()), max_size=6
)  # lone surrogates included
patterns = st.lists(
    st.sampled_from(["*", "**", "?", "a", "b", "@", ".", "/", "x", "é"]), min_size=1, max_size=6
).map("".join)


@st.composite
def conditions(draw: st.DrawFn, name: str) -> Condition:
    if name in NUMERIC:
        kind = draw(st.sampled_from(["equal", "one_of", "range"]))
        if kind == "equal":
            return Condition("equal", value=draw(rule_numbers))
        if kind == "one_of":
            return Condition("one_of", options=tuple(draw(st.lists(rule_numbers, min_size=1))))
        low, high = (
            draw(st.one_of(st.none(), rule_numbers)),
            draw(st.one_of(st.none(), rule_numbers)),
        )
        if low is None and high is None:
            low = draw(rule_numbers)
        if low is not None and high is not None and low > high:
            low, high = high, low
        return Condition("range", low=low, high=high)
    if name == "urgent":
        return Condition("equal", value=draw(st.booleans()))
    kind = draw(st.sampled_from(["equal", "one_of", "glob", "glob"]))
    if kind == "glob":
        return Condition("glob", value=draw(patterns.filter(lambda p: "*" in p or "?" in p)))
    plain = texts.filter(lambda t: "*" not in t and "?" not in t)
    if kind == "equal":
        return Condition("equal", value=draw(plain))
    return Condition("one_of", options=tuple(draw(st.lists(plain, min_size=1, max_size=3))))


@st.composite
def rules(draw: st.DrawFn) -> Rule:
    names = draw(st.lists(st.sampled_from([a.name for a in ACTION.args]), unique=True, max_size=3))
    return Rule(
        effect=draw(st.sampled_from(["allow", "deny", "ask"])),
        tool="payments",
        action=draw(st.sampled_from([None, "pay", "quote"])),
        requester=draw(st.sampled_from([None, "build-bot", "other-bot"])),
        args=tuple((name, draw(conditions(name))) for name in names),
    )


@st.composite
def calls(draw: st.DrawFn, rules_made: dict[str, Rule]) -> Call:
    constants = [
        v
        for rule in rules_made.values()
        for _n, c in rule.args
        for v in (c.value, *c.options, c.low, c.high)
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    shapes = [str(c.value) for r in rules_made.values() for _n, c in r.args if c.kind == "glob"]
    fills = st.sampled_from(shapes).flatmap(_filled) if shapes else texts
    args: dict[str, Any] = {}
    for arg in ACTION.args:
        if not draw(st.booleans()):
            continue  # left out: its default, if any, is filled in
        if arg.name in NUMERIC:
            value = draw(call_numbers(constants))
            if arg.type == "integer":
                value = int(value) if isinstance(value, int) or math.isfinite(value) else 7
            args[arg.name] = value
        elif arg.type == "boolean":
            args[arg.name] = draw(st.booleans())
        else:
            args[arg.name] = draw(st.one_of(texts, odd_texts, fills, st.just("")))
    return Call(
        "payments", "pay", draw(st.sampled_from([None, "build-bot"])), with_defaults(ACTION, args)
    )


def _filled(pattern: str) -> st.SearchStrategy[str]:
    """Values shaped like `pattern`: each wildcard replaced by a short run of anything."""
    parts = [
        texts if ch == "*" else st.sampled_from(ALPHABET) if ch == "?" else st.just(ch)
        for ch in pattern
    ]
    return st.tuples(*parts).map("".join)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_cedar_and_the_reference_decide_every_call_alike(data: st.DataObject) -> None:
    made = {str(i): r for i, r in enumerate(data.draw(st.lists(rules(), min_size=1, max_size=4)))}
    call = data.draw(calls(made))
    found = RuleSet(made).match(call)
    got = (found.effect, found.rules) if found is not None else None
    assert got == ref_decide(made, call), (made, call)


@given(pattern=patterns, value=st.one_of(texts, odd_texts))
@settings(max_examples=600, deadline=None)
def test_the_glob_matcher_agrees_with_the_plain_recursive_one(pattern: str, value: str) -> None:
    from webplatform.trust.rule_values import Glob

    assert Glob(pattern).matches(value) == ref_glob(pattern, value)
