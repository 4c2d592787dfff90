"""How a card lays out a call's arguments (SPEC §25): the manifest's order, the short ones
first, and a recipient never the argument dropped when the card is short of room."""

from __future__ import annotations

import pytest

from dashboard.call_args import shown_args

pytestmark = pytest.mark.unit


def test_manifest_order_with_the_short_ones_first():
    values = {"body": "a\nb", "subject": "s", "to": "t@example.org", "zeta": 1}
    shown = shown_args(values, ["to", "subject", "body"], budget=4000)
    assert [a.name for a in shown] == ["to", "subject", "zeta", "body"]
    assert [a.text for a in shown] == ["t@example.org", "s", "1", "a\nb"]
    assert [a.string for a in shown] == [True, True, False, True]


def test_the_recipient_gets_the_room_first_and_every_argument_is_named():
    values = {"body": "x" * 5000, "note": "y" * 100, "to": "board@example.org"}
    shown = {a.name: a for a in shown_args(values, ["body", "note", "to"], budget=60)}
    assert set(shown) == {"body", "note", "to"}
    assert shown["to"].text == "board@example.org" and not shown["to"].clipped
    assert sum(len(a.text) for a in shown.values()) == 60
    assert shown["body"].clipped and shown["body"].chars == 5000
