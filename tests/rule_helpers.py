"""Rule rows for tests that need what aat itself would refuse to make."""

from __future__ import annotations

from webplatform.jobs import ruling
from webplatform.platform import Platform
from webplatform.store import rules as rule_rows
from webplatform.trust.authority import seal_for


def broken_rule(
    platform: Platform, effect: str, cedar: str, action: str | None = "send-message"
) -> int:
    """A rule row made and signed through the store, whose Cedar does not compile (as one
    made before the compiler escaped `Café` properly would be)."""
    seal = seal_for(platform)
    new = rule_rows.NewRule(
        effect=effect,
        tool="outbox",
        action=action,
        requester=None,
        args_json="{}",
        cedar=cedar,
        expires_at=None,
        max_runs=None,
        note="",
    )
    row = platform.transact(lambda s: rule_rows.add_rule(session=s, rule=new, by="ada", seal=seal))
    ruling.forget(platform)
    assert row.id is not None
    return row.id
