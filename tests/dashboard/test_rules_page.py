"""The Rules page (SPEC §16): an admin makes rules with a step-up bound to the text, sees
each in its YAML and Cedar forms with its runs, and revokes it; others cannot."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable

from dash_helpers import ORIGIN, PASSWORD, add_operator, csrf
from fastapi.testclient import TestClient
from rule_helpers import broken_rule

from webplatform.jobs import ruling
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store.models import Surface
from webplatform.trust import rulebook

SENT = {"to": "ops@example.org", "subject": "weekly", "body": "hi"}

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
    row = re.search(r'<tr data-rule-id="1"[^>]*>.*?</tr>', html, re.S)
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


def test_a_call_a_rule_allowed_names_the_rule_on_its_page_history_and_exports(
    platform: Platform, alice: TestClient
) -> None:
    assert _make(alice, RULES)[0] == 200
    ruling.forget(platform)
    answer = request_run(
        platform=platform,
        call=RunCall(kind="tool", name="outbox", action="send-message", args=SENT),
        actor=Actor(surface=Surface.mcp_stdio, client="test-agent"),
        consent=Consent.QUEUE,
    )
    job = answer.job
    assert answer.allowed_by is not None and answer.allowed_by["rule"] == 1
    page = alice.get(f"/jobs/{job}").text
    allowed = re.search(r'<dd class="allowed-by" data-rule="1">.*?</dd>', page, re.S)
    assert allowed is not None and "no one was asked" in allowed.group(0)
    assert "<dt>approved by</dt>" not in page  # the rule's maker did not approve this call
    row = re.search(rf'<a href="[^"]*/jobs/{job}">.*?</tr>', alice.get("/jobs").text, re.S)
    assert row is not None and 'data-rule="1">by rule 1' in row.group(0)
    exported = list(csv.DictReader(io.StringIO(alice.get("/jobs.csv").text)))
    assert next(r for r in exported if r["id"] == str(job))["allowed_by_rule"] == "1"


def test_each_pattern_shows_two_values_it_allows_and_two_it_does_not(
    platform: Platform, alice: TestClient
) -> None:
    _make(alice, RULES)
    html = alice.get("/rules").text
    shown = re.search(r'<small class="glob-examples" data-glob="to">(.*?)</small>', html, re.S)
    assert shown is not None
    allows, _, refuses = shown.group(1).partition("not ")
    assert re.findall(r"<code>(.*?)</code>", allows)[1:] == [
        '"ann@example.org"',
        '"x1@example.org"',
    ]
    assert '"a, b@example.org"' in refuses and '"a/b@example.org"' in refuses


def test_a_rule_that_cannot_be_evaluated_is_flagged_and_harms_no_page(
    platform: Platform, alice: TestClient
) -> None:
    broken = broken_rule(platform, "allow", "not Cedar at all")
    assert (
        request_run(
            platform=platform,
            call=RunCall(kind="tool", name="hello-world", action="greet", args={"name": "Café"}),
            actor=Actor(surface=Surface.mcp_stdio, client="test-agent"),
            consent=Consent.NONE,
        ).status.value
        == "succeeded"
    )
    assert alice.get("/approvals").status_code == 200
    html = alice.get("/rules").text
    row = re.search(rf'<tr data-rule-id="{broken}"[^>]*>.*?</tr>', html, re.S)
    assert row is not None and "data-unusable" in row.group(0)
