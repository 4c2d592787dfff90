"""Rules (SPEC §16), the engine: the YAML and Cedar forms, what may not be made, and how the
rules in force decide a call, evaluated by Cedar (`cedarpy`) against the example registry."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.registry import RegistryLoader
from webplatform.registry.model import Registry
from webplatform.trust.rule_matching import RuleSet
from webplatform.trust.rules import Call, Rule, RuleError, check, parse_cedar, parse_yaml

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
# What `check` reads of the settings (AAT_RULE_MAX_HOURS, the approval floor); no home is used.
SETTINGS = Settings(home=Path(tempfile.gettempdir()) / "aat-rules-unused")

SPEC_EXAMPLE = """
- effect: allow            # allow | deny | ask
  tool: outbox
  action: send-message     # omit for every action of the tool
  requester: build-bot     # an agent token's name; omit for any requester
  args:                    # every condition must hold; arguments not named are free
    to: "*@example.org"    # a string with * or ? is a glob, otherwise equality
    subject: {one_of: [Weekly report, Daily report]}
    delay-s: {max: 10}     # also min
  expires_in: 1h           # or expires_at: ISO time; required for allow
  max_runs: 20             # optional
  note: weekly reports to our own domain
"""


@pytest.fixture(scope="module")
def registry() -> Registry:
    return RegistryLoader([EXAMPLES_ROOT]).load()


def _send(requester: str | None = "build-bot", **args: object) -> Call:
    full = {"to": "ann@example.org", "subject": "Weekly report", "body": "b", "delay-s": 0}
    return Call("outbox", "send-message", requester, {**full, **args})


def _one(text: str, registry: Registry) -> Rule:
    (rule,) = parse_yaml(text, now=NOW)
    check(rule, registry, now=NOW, settings=SETTINGS)
    return rule


def test_the_spec_example_parses_checks_and_compiles_to_cedar(registry: Registry) -> None:
    rule = _one(SPEC_EXAMPLE, registry)
    assert (rule.effect, rule.tool, rule.action, rule.requester) == (
        "allow",
        "outbox",
        "send-message",
        "build-bot",
    )
    assert rule.expires_at == NOW + timedelta(hours=1) and rule.max_runs == 20
    assert rule.cedar.startswith('@effect("allow")\n@expires("2026-12-01T13:00:00Z")')
    assert 'permit(principal == Agent::"build-bot", action == Action::"outbox/send-message"' in (
        rule.cedar
    )
    # The compiled text is Cedar the engine reads back as the same scope.
    (again,) = parse_cedar(rule.cedar)
    assert (again.effect, again.tool, again.action, again.requester, again.max_runs) == (
        "allow",
        "outbox",
        "send-message",
        "build-bot",
        20,
    )
    assert again.expires_at == rule.expires_at


@pytest.mark.parametrize(
    ("call", "matched"),
    [
        (_send(), True),
        (_send(to="ann@example.org.evil.test"), False),  # the glob is anchored
        (_send(to="ANN@EXAMPLE.ORG"), False),  # and case-sensitive
        (_send(subject="Monthly report"), False),
        (_send(**{"delay-s": 10}), True),
        (_send(**{"delay-s": 10.5}), False),
        (_send(requester="other-bot"), False),
        (_send(requester=None), False),  # no token: only rules without a requester
    ],
)
def test_an_allow_rule_matches_only_the_calls_it_names(
    registry: Registry, call: Call, matched: bool
) -> None:
    rules = RuleSet({"r1": _one(SPEC_EXAMPLE, registry)})
    found = rules.match(call)
    assert (found is not None) is matched
    if found is not None:
        assert found.effect == "allow" and found.rules == ("r1",)


def test_deny_wins_over_ask_and_ask_over_allow(registry: Registry) -> None:
    allow = _one(SPEC_EXAMPLE, registry)
    ask = _one("effect: ask\ntool: outbox\nargs: {subject: '**report'}", registry)
    deny = _one("effect: deny\ntool: outbox\naction: send-message\nargs: {to: ann@*}", registry)
    assert RuleSet({"a": allow, "b": ask}).match(_send()).effect == "ask"  # type: ignore[union-attr]
    both = RuleSet({"a": allow, "b": ask, "c": deny}).match(_send())
    assert both is not None and (both.effect, both.rules) == ("deny", ("c",))
    assert RuleSet({"a": allow, "c": deny}).match(_send(to="bob@example.org")).effect == "allow"  # type: ignore[union-attr]


def test_a_rule_without_requester_matches_calls_with_and_without_a_token(
    registry: Registry,
) -> None:
    ask = RuleSet({"x": _one("effect: ask\ntool: xlsx\naction: dump", registry)})
    for requester in (None, "any-bot"):
        found = ask.match(Call("xlsx", "dump", requester, {"path": "a.xlsx", "save": True}))
        assert found is not None and found.effect == "ask"
    assert ask.match(Call("outbox", "send-message", None, {})) is None


def test_a_rule_written_in_cedar_is_matched_as_written(registry: Registry) -> None:
    text = """
    @effect("deny")
    forbid(principal, action == Action::"outbox/send-message", resource == Tool::"outbox")
    when { context.args.subject like "*password*" };

    @effect("ask")
    permit(principal == Agent::"build-bot", action, resource == Tool::"outbox");
    """
    deny, ask = parse_cedar(text)
    for rule in (deny, ask):
        check(rule, registry, now=NOW, settings=SETTINGS)
    rules = RuleSet({"d": deny, "a": ask})
    assert rules.match(_send(subject="your password")).effect == "deny"  # type: ignore[union-attr]
    assert rules.match(_send()).effect == "ask"  # type: ignore[union-attr]
    assert rules.match(_send(requester="other")) is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("effect: allow\ntool: outbox\n  bad: [", "line 3: YAML syntax error"),
        ("- effect: allow\n  tool: outbox\n  expire_in: 1h", "line 3: unknown key `expire_in`"),
        ("effect: permit\ntool: outbox", "line 1: `effect` is 'permit': use allow, deny or ask"),
        ("effect: deny\ntool: outbox\nargs: {n: {max: 1.0005}}", "more than 3 decimal places"),
        (
            "effect: deny\ntool: outbox\nargs: {n: 1000000000000001}",
            "beyond the ±100,000,000,000,000",
        ),
        ("effect: deny\ntool: outbox\nargs: {n: .nan}", "not a number a call can be compared"),
        ("effect: allow\ntool: outbox\nexpires_in: soon", "is not a duration"),
        ("effect: allow\ntool: outbox\nmax_runs: 0", "use a whole number, 1 or more"),
        ("effect: deny\ntool: outbox\nargs: {n: {min: 3, max: 1}}", "min <= max"),
        ("", "no rule here"),
    ],
)
def test_a_rule_that_does_not_parse_says_which_line(text: str, error: str) -> None:
    with pytest.raises(RuleError, match=error.replace("?", r"\?").replace("[", r"\[")):
        parse_yaml(text, now=NOW)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "effect: allow\ntool: outbox\naction: send-message\nargs: {to: a@x.org}",
            "needs an expiry",
        ),
        (
            "effect: allow\ntool: outbox\naction: send-message\nargs: {to: a@x.org}\n"
            "expires_in: 25h",
            "at most 24 h (AAT_RULE_MAX_HOURS)",
        ),
        (
            "effect: allow\ntool: outbx\nexpires_in: 1h",
            "no tool named 'outbx': did you mean 'outbox'?",
        ),
        ("effect: ask\ntool: outbox\naction: send-mesage", "did you mean 'send-message'?"),
        ("effect: ask\ntool: outbox\naction: send-message\nargs: {too: x}", "did you mean 'to'?"),
        (
            "effect: allow\ntool: outbox\naction: send-message\nargs: {to: '*'}\nexpires_in: 1h",
            "every call of an irreversible action",
        ),
        (
            "effect: allow\ntool: outbox\naction: delete-messages\nexpires_in: 1h",
            "say `any: true`",
        ),
        ("effect: ask\ntool: outbox\nargs: {to: {min: 1}}", "min and max need a number"),
        ("effect: ask\ntool: outbox\nargs: {delay-s: fast}", "compare it with a number"),
    ],
)
def test_a_rule_that_may_not_be_made_says_why(registry: Registry, text: str, error: str) -> None:
    (rule,) = parse_yaml(text, now=NOW)
    with pytest.raises(RuleError, match="line 1: .*" + _escape(error)):
        check(rule, registry, now=NOW, settings=SETTINGS)


def _escape(text: str) -> str:
    return "".join("\\" + c if c in "()?*[]{}.+|^$" else c for c in text)


def test_any_true_is_how_an_unbounded_allow_is_said(registry: Registry) -> None:
    rule = _one(
        "effect: allow\ntool: outbox\naction: delete-messages\nexpires_in: 15m\nany: true", registry
    )
    assert RuleSet({"r": rule}).match(Call("outbox", "delete-messages", None, {})) is not None


def test_cedar_that_does_not_parse_names_the_policy_line() -> None:
    text = 'permit(principal, action, resource == Tool::"outbox");\n\n'
    text += "permit(principal, action resource);"
    with pytest.raises(RuleError, match="line 3: the Cedar does not parse"):
        parse_cedar(text)
    with pytest.raises(RuleError, match="names its tool"):
        parse_cedar("permit(principal, action, resource);")
