"""What an audit event's hash covers is fixed: hashes written by any earlier aat must still
verify. The expected values were computed by the code that first wrote the chain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from webplatform.store.audit_chain import GENESIS, AuditEntry, content_hash

AT = datetime(2026, 1, 31, 14, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))


def test_a_decision_event_hashes_as_it_always_has() -> None:
    entry = AuditEntry(
        actor="alice",
        event="approved",
        job_id=7,
        from_state="pending_approval",
        to_state="approved",
        detail="tool outbox send-message sha256:ab",
        address="127.0.0.1",
    )
    expected = "13ac623e072bbe05e44ce7b58756a5cc145fb1524bdaf023c5026085b487a5ae"
    assert content_hash(GENESIS, entry, AT) == expected
    # The instant is hashed in UTC: the same moment in another zone is the same event.
    assert content_hash(GENESIS, entry, AT.astimezone(UTC)) == expected


def test_an_event_without_a_job_hashes_as_it_always_has() -> None:
    entry = AuditEntry(actor="ops", event="login")
    expected = "5baa50698922eaef5e3f549d811c4b551a5d2021436418562898dc65082ab521"
    assert content_hash("f" * 64, entry, AT) == expected
