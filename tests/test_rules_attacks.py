"""The third hostile review's rule findings (SPEC §20), each as the attack that got a call past
the gate, on SQLite and PostgreSQL, through `request_run` as every surface calls it:

- a big, tiny or NaN number escaped a deny or ask rule (finding 1);
- an argument left out skipped a deny on its default (finding 2);
- text a rule could not compile took every call down (finding 3);
- `*@example.org` allowed a list of addresses and a line break (finding 5);
- allow rules that could never apply under the settings were accepted (finding 7).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rule_helpers import broken_rule
from sqlmodel import select

from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import ruling
from webplatform.jobs.answers import Answer, Refusal, Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store import rules as rule_rows
from webplatform.store.models import AuditEvent, Surface
from webplatform.trust import rulebook
from webplatform.trust.rules import RuleError

TESTS = Path(__file__).resolve().parent
AGENT = Actor(surface=Surface.mcp_stdio, client="test-agent")


@pytest.fixture
def platform_settings(settings: Settings) -> Settings:
    """The test tools (payments, site) and the examples, on the test's database."""
    return settings.model_copy(update={"registry": f"{TESTS}:{EXAMPLES_ROOT}"})


def _rules(platform: Platform, text: str) -> list[int]:
    ids = rulebook.add(platform, rulebook.parse(rulebook.Source(text), platform), by="ada")
    ruling.forget(platform)
    return ids


def _allowed(answer: Answer) -> bool:
    """Allowed by a rule without asking: approved (for a worker to run), or already run."""
    ran = (Status.approved, Status.running, Status.succeeded)
    return answer.allowed_by is not None and answer.status in ran


def _call(platform: Platform, tool: str, action: str, consent: Consent, **args: Any) -> Answer:
    try:
        return request_run(
            platform=platform,
            call=RunCall(kind="tool", name=tool, action=action, args=args),
            actor=AGENT,
            consent=consent,
        )
    except Refusal as refused:
        return refused.answer


PAY_RULES = """
- effect: allow
  tool: payments
  action: pay
  any: true
  expires_in: 1h
- effect: deny
  tool: payments
  action: pay
  args: {amount: {min: 1000}}
- effect: ask
  tool: payments
  action: quote
  args: {amount: {min: 1000}}
"""


@pytest.mark.parametrize(
    "amount", [5000, 10**15, 10**30, 1e300, float("inf"), float("nan"), 1000.00001]
)
def test_no_number_escapes_a_deny_rule_for_a_broader_allow(
    platform: Platform, amount: float
) -> None:
    _rules(platform, PAY_RULES)
    answer = _call(platform, "payments", "pay", Consent.QUEUE, amount=amount)
    assert answer.status is Status.refused, answer
    assert "refused by rule" in (answer.error or "")
    # Below the bound, the broad allow rule still lets the call run without asking.
    below = _call(platform, "payments", "pay", Consent.QUEUE, amount=999.9999)
    assert _allowed(below), below


@pytest.mark.parametrize("amount", [10**15, 1e300, float("nan"), 1000.00001])
def test_no_number_escapes_an_ask_rule_on_a_reversible_action(
    platform: Platform, amount: float
) -> None:
    _rules(platform, PAY_RULES)
    answer = _call(platform, "payments", "quote", Consent.NONE, amount=amount)
    assert answer.status is Status.pending_approval, answer
    assert _call(platform, "payments", "quote", Consent.NONE, amount=10).status is Status.succeeded


def test_a_number_just_past_a_bound_is_not_allowed_by_it(platform: Platform) -> None:
    _rules(
        platform,
        "effect: allow\ntool: payments\naction: pay\nargs: {amount: {max: 100}}\nexpires_in: 1h",
    )
    for amount in (100.00004, 100.0001, 10**20):
        answer = _call(platform, "payments", "pay", Consent.QUEUE, amount=amount)
        assert answer.status is Status.pending_approval and answer.allowed_by is None, amount
    exact = _call(platform, "payments", "pay", Consent.QUEUE, amount=100)
    assert _allowed(exact), exact


def test_a_deny_on_an_argument_left_out_applies_to_its_default(platform: Platform) -> None:
    _rules(
        platform,
        """
- effect: allow
  tool: site
  action: publish
  args: {branch: main}
  expires_in: 1h
- effect: deny
  tool: site
  action: publish
  args: {target: production}
""",
    )
    answer = _call(platform, "site", "publish", Consent.QUEUE, branch="main")
    assert answer.status is Status.refused, answer
    staged = _call(platform, "site", "publish", Consent.QUEUE, branch="main", target="staging")
    assert _allowed(staged), staged


def test_the_default_is_part_of_the_queued_call_and_its_digest(platform: Platform) -> None:
    answer = _call(platform, "site", "publish", Consent.QUEUE, branch="dev")
    assert answer.status is Status.pending_approval and answer.job is not None
    job = platform.transact(lambda s: _job(s, answer.job), write=False)
    assert json.loads(job.args_json) == {"branch": "dev", "target": "production"}


def _job(session: Any, job_id: int | None) -> Any:
    from webplatform.store.models import Job

    return session.get(Job, job_id)


ADDRESS_RULE = """
effect: allow
tool: outbox
action: send-message
args: {to: "*@example.org"}
expires_in: 1h
"""


@pytest.mark.parametrize(
    "to",
    [
        "mallory@evil.example, x@example.org",
        "mallory@evil.example,x@example.org",
        "x@example.org\nBcc: mallory@evil.example",
        "mallory@evil.example\n@example.org",
        "a b@example.org",
        "evil/x@example.org",
    ],
)
def test_a_glob_does_not_cross_separators_or_lines(platform: Platform, to: str) -> None:
    _rules(platform, ADDRESS_RULE)
    answer = _call(platform, "outbox", "send-message", Consent.QUEUE, to=to, subject="s", body="b")
    assert answer.status is Status.pending_approval and answer.allowed_by is None, answer


def test_the_glob_still_allows_an_address_of_the_domain(platform: Platform) -> None:
    _rules(platform, ADDRESS_RULE)
    answer = _call(
        platform,
        "outbox",
        "send-message",
        Consent.QUEUE,
        to="ann@example.org",
        subject="s",
        body="b",
    )
    assert _allowed(answer), answer


TEXTS = ["Café", "naïve ☃ 😀", "\u202eevil", "line\nbreak", "nul\x00byte", 'quote " back \\']


@pytest.mark.parametrize("text", TEXTS)
def test_any_text_in_a_rule_compiles_and_decides(platform: Platform, text: str) -> None:
    # Written as the card's Approve and allow similar writes it (yaml.safe_dump).
    rule = {"effect": "allow", "tool": "outbox", "action": "send-message"}
    rule |= {"args": {"subject": text}, "expires_in": "1h"}
    _rules(platform, yaml.safe_dump([rule], allow_unicode=True))
    same = _call(
        platform, "outbox", "send-message", Consent.QUEUE, to="a@x.org", subject=text, body="b"
    )
    assert _allowed(same), same
    other = _call(
        platform, "outbox", "send-message", Consent.QUEUE, to="a@x.org", subject="x", body="b"
    )
    assert other.status is Status.pending_approval
    assert _call(platform, "hello-world", "greet", Consent.NONE, name=text).status is (
        Status.succeeded
    )


def test_a_rule_that_does_not_compile_harms_no_other_call(platform: Platform) -> None:
    broken = broken_rule(
        platform,
        "allow",
        '@effect("allow")\npermit(principal, action, resource) '
        'when { context.args.subject like "Caf\\u00e9" };',
    )
    _rules(platform, "effect: deny\ntool: payments\naction: pay\nargs: {amount: {min: 10}}")
    assert _call(platform, "hello-world", "greet", Consent.NONE, name="x").status is (
        Status.succeeded
    )
    assert _call(platform, "payments", "pay", Consent.QUEUE, amount=50).status is Status.refused
    # The broken allow rule allows nothing: the call it names waits for an operator.
    sent = _call(
        platform, "outbox", "send-message", Consent.QUEUE, to="a@x.org", subject="Café", body="b"
    )
    assert sent.status is Status.pending_approval
    listed = {row["id"]: row for row in rulebook.listing(platform)}
    assert listed[broken]["unusable"]
    for _ in range(3):
        _call(
            platform, "outbox", "send-message", Consent.QUEUE, to="a@x.org", subject="x", body="b"
        )
    assert _unusable_events(platform) == [broken]


@pytest.mark.parametrize("effect", ["deny", "ask"])
def test_a_deny_or_ask_rule_that_cannot_be_evaluated_applies(
    platform: Platform, effect: str
) -> None:
    # Cedar fails on this rule for every call (a string has no `lessThan`): it still applies.
    cedar = (
        f'@effect("{effect}")\n'
        f"{'forbid' if effect == 'deny' else 'permit'}(principal, action, resource == "
        'Tool::"outbox") when { context.args.subject.lessThan(decimal("1.0")) };'
    )
    rule = broken_rule(platform, effect, cedar, action=None)
    answer = _call(
        platform, "outbox", "send-message", Consent.QUEUE, to="a@x.org", subject="s", body="b"
    )
    expected = Status.refused if effect == "deny" else Status.pending_approval
    assert answer.status is expected, answer
    if effect == "ask":  # nothing but the rule asks for it: a reversible call now waits too
        assert _call(platform, "outbox", "list-messages", Consent.NONE).status is expected
    assert _call(platform, "hello-world", "greet", Consent.NONE, name="x").status is (
        Status.succeeded
    )
    assert _unusable_events(platform) == [rule]


def _unusable_events(platform: Platform) -> list[int]:
    def read(session: Any) -> list[str | None]:
        found = select(AuditEvent.detail).where(AuditEvent.event == rule_rows.RULE_UNUSABLE)
        return list(session.exec(found))

    return [int(str(d).split(":")[0].removeprefix("rule ")) for d in platform.transact(read)]


@pytest.mark.parametrize(
    "update",
    [{"self_approval": False}, {"approvals_required": 2}],
    ids=["AAT_SELF_APPROVAL=0", "AAT_APPROVALS_REQUIRED=2"],
)
def test_an_allow_rule_the_settings_never_apply_is_refused_when_made(
    platform_settings: Settings, update: dict[str, Any]
) -> None:
    platform = Platform(platform_settings.model_copy(update=update))
    try:
        with pytest.raises(RuleError, match="no rule can allow it"):
            rulebook.parse(rulebook.Source(ADDRESS_RULE), platform)
        # Deny and ask rules still apply, so they may still be made.
        rulebook.parse(
            rulebook.Source("effect: deny\ntool: outbox\naction: send-message"), platform
        )
    finally:
        platform.engine.dispose()
