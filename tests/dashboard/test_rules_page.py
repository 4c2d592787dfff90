"""The Rules page (SPEC §16): an admin makes rules with a step-up bound to the text, sees
each in its YAML and Cedar forms with its runs, and revokes it; others cannot."""

from __future__ import annotations

import re
from collections.abc import Callable

from dash_helpers import ORIGIN, PASSWORD, add_operator, csrf
from fastapi.testclient import TestClient

from webplatform.platform import Platform
from webplatform.trust import rulebook

RULES = """- effect: allow
  tool: outbox
  action: send-message
  args: {to: "*@example.org"}
  expires_in: 1h
  max_runs: 3
- effect: deny
  tool: outbox
  action: delete-messages
"""


def _make(client: TestClient, text: str, password: str = PASSWORD) -> tuple[int, str]:
    form = {"csrf_token": csrf(client, "/rules"), "text": text, "password": password}
    r = client.post("/rules", data=form, headers=ORIGIN)
    return r.status_code, r.text


def test_an_admin_makes_sees_and_revokes_rules(platform: Platform, alice: TestClient) -> None:
    assert "No rules" in alice.get("/rules").text
    status, html = _make(alice, RULES)
    assert status == 200 and "Made rule(s) 1, 2." in html
    row = re.search(r'<tr data-rule-id="1">.*?</tr>', html, re.S)
    assert row is not None
    assert "allow" in row.group(0) and "0 of 3" in row.group(0)
    assert "*@example.org" in row.group(0) and "permit(principal" in row.group(0)
    assert [r["created_by"] for r in rulebook.listing(platform)] == ["alice", "alice"]

    in_force = alice.get("/approvals").text
    assert "Rules in force" in in_force
    assert '<li data-rule-id="1"><strong>allow</strong>' in in_force
    assert '<li data-rule-id="2"><strong>deny</strong>' in in_force

    form = {"csrf_token": csrf(alice, "/rules"), "password": PASSWORD}
    revoked = alice.post("/rules/1/revoke", data=form, headers=ORIGIN)
    assert revoked.status_code == 200 and "Revoked rule 1." in revoked.text
    assert {r["id"]: r["revoked"] for r in rulebook.listing(platform)} == {1: True, 2: False}
    after = alice.get("/approvals").text
    assert 'data-rule-id="1"' not in after and 'data-rule-id="2"' in after


def test_without_the_password_nothing_is_made_or_revoked(
    platform: Platform, alice: TestClient
) -> None:
    status, html = _make(alice, RULES, password="wrong")
    assert status == 403 and rulebook.listing(platform) == []
    assert _make(alice, RULES)[0] == 200
    form = {"csrf_token": csrf(alice, "/rules"), "password": ""}
    assert alice.post("/rules/1/revoke", data=form, headers=ORIGIN).status_code == 403
    assert not rulebook.listing(platform)[-1]["revoked"]


def test_a_rule_that_may_not_be_made_says_why_and_keeps_the_text(
    platform: Platform, alice: TestClient
) -> None:
    status, html = _make(alice, "effect: allow\ntool: outbox\nargs: {to: a@b.c}\n")
    assert status == 422 and "line 1: an allow rule needs an expiry" in html
    assert "args: {to: a@b.c}" in html and rulebook.listing(platform) == []


def test_only_admins_see_the_rules_page(
    platform: Platform, alice: TestClient, client_as: Callable[[str], TestClient]
) -> None:
    add_operator(platform, "bob", role="approver")
    bob = client_as("bob")
    assert bob.get("/rules").status_code == 403
    refused = bob.post("/rules", data={"text": RULES, "password": PASSWORD}, headers=ORIGIN)
    assert refused.status_code == 403 and rulebook.listing(platform) == []
