"""The rule an `allow` found is read again, alone, before the call is recorded approved
(SPEC §16): revoked, expired or spent since the rules were read, it allows nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from webplatform.jobs import ruling
from webplatform.jobs.recording import Asked
from webplatform.platform import Actor, Platform
from webplatform.store import rules as rule_rows
from webplatform.store.models import RuleRow, Surface
from webplatform.trust import rulebook
from webplatform.trust.authority import seal_for

ALLOW = (
    "- effect: allow\n  tool: outbox\n  action: send-message\n  args: {to: '*@example.org'}\n"
    "  expires_in: 1h\n  max_runs: 3\n"
)


def _asked(platform: Platform) -> Asked:
    tool = platform.registry().tools["outbox"]
    action = tool.action("send-message")
    assert action is not None
    args = {"to": "ann@example.org", "subject": "s", "body": "b", "delay-s": 0}
    return Asked(spec=tool, action=action, args=args, actor=Actor(surface=Surface.mcp_stdio))


def test_a_rule_revoked_since_the_rules_were_read_allows_nothing(platform: Platform) -> None:
    (rule,) = rulebook.add(platform, rulebook.parse(rulebook.Source(ALLOW), platform), by="ada")
    ruling.forget(platform)
    asked = _asked(platform)
    found = ruling.match(platform, asked)  # the rules as this process read them
    assert found is not None and found.rules == (str(rule),)
    rulebook.revoke(platform, rule, by="ada")
    assert ruling.allow(platform, asked, found, None) is None


def test_a_rule_is_in_force_until_it_expires_or_its_budget_is_spent(platform: Platform) -> None:
    (rule,) = rulebook.add(platform, rulebook.parse(rulebook.Source(ALLOW), platform), by="ada")
    now = datetime.now(UTC)

    def row() -> RuleRow:
        found = platform.transact(
            lambda s: rule_rows.find_rule(session=s, rule_id=rule, seal=seal_for(platform))
        )
        assert found is not None
        return found

    assert rule_rows.in_force(row(), now)
    assert not rule_rows.in_force(row(), now + timedelta(hours=2))
    for _ in range(3):
        assert platform.transact(lambda s: rule_rows.take_run(session=s, rule_id=rule))
    assert not rule_rows.in_force(row(), now)
