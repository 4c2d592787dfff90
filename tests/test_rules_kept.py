"""Rules as kept (SPEC §16), on SQLite and PostgreSQL: made signed, matched while in force,
revoked, a forged or edited row allowing nothing, and a budget's last run taken once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlmodel import select

from webplatform.platform import Platform
from webplatform.store import rules as rule_rows
from webplatform.store.models import AuditEvent
from webplatform.trust import rulebook
from webplatform.trust.rules import Call, RuleError

ALLOW_REPORTS = """
- effect: allow
  tool: outbox
  action: send-message
  args: {to: "*@example.org"}
  expires_in: 1h
  max_runs: 2
  note: reports to our own domain
- effect: deny
  tool: outbox
  action: delete-messages
"""


def _send(to: str = "ann@example.org") -> Call:
    return Call("outbox", "send-message", None, {"to": to, "subject": "s", "body": "b"})


def _kept(platform: Platform, source: str = ALLOW_REPORTS) -> list[int]:
    rules = rulebook.parse(rulebook.Source(source), platform)
    return rulebook.add(platform, rules, by="ada")


def test_rules_made_are_listed_and_decide_calls_while_in_force(platform: Platform) -> None:
    allow, deny = _kept(platform)
    listed = {row["id"]: row for row in rulebook.listing(platform)}
    assert listed[allow]["effect"] == "allow" and listed[allow]["args"] == {"to": "*@example.org"}
    assert listed[allow]["max_runs"] == 2 and listed[allow]["runs"] == 0
    assert listed[allow]["created_by"] == "ada" and listed[deny]["revoked"] is False
    assert all(row["signed"] for row in listed.values())
    rules = rulebook.in_force(platform)
    assert rules.match(_send()).rules == (str(allow),)  # type: ignore[union-attr]
    assert rules.match(Call("outbox", "delete-messages", None, {})).effect == "deny"  # type: ignore[union-attr]

    rulebook.revoke(platform, allow, by="ada")
    assert rulebook.in_force(platform).match(_send()) is None
    with pytest.raises(RuleError, match=f"no rule {allow} to revoke"):
        rulebook.revoke(platform, allow, by="ada")


def test_an_expired_rule_or_a_spent_budget_is_no_longer_in_force(platform: Platform) -> None:
    allow, _deny = _kept(platform)
    later = datetime.now(UTC) + timedelta(hours=2)
    assert rulebook.in_force(platform, now=later).match(_send()) is None
    for _ in range(2):
        assert platform.transact(lambda s: rule_rows.take_run(session=s, rule_id=allow))
    assert not platform.transact(lambda s: rule_rows.take_run(session=s, rule_id=allow))
    assert rulebook.in_force(platform).match(_send()) is None


@pytest.mark.parametrize(
    "forgery",
    [
        "UPDATE rule SET args_json = '{}', cedar = '@effect(\"allow\") permit(principal, "
        "action, resource == Tool::\"outbox\");' WHERE effect = 'allow'",
        "UPDATE rule SET expires_at = expires_at + interval '30 days' WHERE effect = 'allow'",
        "UPDATE rule SET revoked_at = NULL, revoked_by = NULL WHERE effect = 'allow'",
    ],
    ids=["widened", "extended", "unrevoked"],
)
def test_a_rule_edited_in_the_database_allows_nothing_and_is_audited(
    platform: Platform, forgery: str
) -> None:
    allow, _deny = _kept(platform)
    if "unrevoked" in forgery or "revoked_at = NULL" in forgery:
        rulebook.revoke(platform, allow, by="ada")
    if "interval" in forgery and platform.engine.dialect.name == "sqlite":
        forgery = "UPDATE rule SET expires_at = '2099-01-01 00:00:00' WHERE effect = 'allow'"
    with platform.engine.begin() as conn:
        assert conn.execute(text(forgery)).rowcount == 1
    rules = rulebook.in_force(platform)
    assert rules.match(_send()) is None and rules.match(_send("x@evil.test")) is None
    listed = {row["id"]: row for row in rulebook.listing(platform)}
    assert listed[allow]["signed"] is False
    events = platform.transact(
        lambda s: [
            e.detail for e in s.exec(select(AuditEvent)) if e.event == "authority-row-invalid"
        ],
        write=False,
    )
    assert any(f"rule {allow}" in (detail or "") for detail in events)


def test_two_workers_racing_for_a_rules_last_run_start_it_once(platform: Platform) -> None:
    (allow,) = _kept(
        platform,
        "effect: allow\ntool: outbox\naction: send-message\nargs: {to: a@example.org}\n"
        "expires_in: 1h\nmax_runs: 1",
    )
    barrier, won = threading.Barrier(2), []

    def take() -> None:
        barrier.wait()
        won.append(platform.transact(lambda s: rule_rows.take_run(session=s, rule_id=allow)))

    racers = [threading.Thread(target=take) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    assert sorted(won) == [False, True]


def test_a_rule_that_may_not_be_made_is_not_kept(platform: Platform) -> None:
    with pytest.raises(RuleError, match="line 1: an allow rule needs an expiry"):
        rulebook.parse(rulebook.Source("effect: allow\ntool: outbox\nargs: {to: a@b.c}"), platform)
    assert rulebook.listing(platform) == []
