"""Approve and allow similar (SPEC §16): from a card, an admin approves the call and makes an
`allow` rule for calls like it, in one step, with one step-up bound to both the job's
digest and the rule's text; the rule then lets identical calls run without a card."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dash_helpers import ORIGIN, PASSWORD, add_operator, card_preview, csrf
from fastapi.testclient import TestClient
from soft_authenticator import SoftAuthenticator
from sqlmodel import select

from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Answer, Refusal
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store.engine import session_scope
from webplatform.store.models import AuditEvent, Job, JobState, Surface
from webplatform.trust import rulebook
from webplatform.worker import make_worker

CALL = {"to": "bob@example.org", "subject": "weekly", "body": "hello"}
BOT = "build-bot"
LOCAL = "http://localhost:8000"  # where passkeys work (their relying party)
LOCAL_ORIGIN = {"Origin": LOCAL}


def ask(platform: Platform, agent: str | None = BOT, **args: Any) -> Answer:
    """An agent's run_tool_confirmed of outbox send-message (with its token when `agent`)."""
    actor = Actor(surface=Surface.mcp_http, client="test-agent", agent=agent)
    call = RunCall(kind="tool", name="outbox", action="send-message", args={**CALL, **args})
    try:
        return request_run(platform=platform, call=call, actor=actor, consent=Consent.QUEUE)
    except Refusal as refusal:
        return refusal.answer


def job(platform: Platform, job_id: int) -> Job:
    with session_scope(platform.engine, write=False) as session:
        found = jobs.get_job(session=session, job_id=job_id)
        assert found is not None
        return found


def events(platform: Platform, name: str) -> list[AuditEvent]:
    with session_scope(platform.engine, write=False) as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.event == name)).all())


def similar_form(
    client: TestClient, platform: Platform, job_id: int, *, exact: tuple[str, ...] = ("to",)
) -> dict[str, str]:
    """The card's form as an operator fills it: `exact` matched exactly, the rest any, 1h
    (with the preview the card shows once it landed, as the card's form sends it)."""
    form = {
        "csrf_token": csrf(client, "/approvals"),
        "digest": job(platform, job_id).args_digest,
        "return_to": "job",
        "duration": "1h",
        **card_preview(platform, job_id),
    }
    return form | {f"match_{name}": "exact" if name in exact else "any" for name in CALL}


def post(client: TestClient, job_id: int, form: dict[str, str], origin: str = "") -> Any:
    headers = {"Origin": origin} if origin else ORIGIN
    return client.post(f"/jobs/{job_id}/allow-similar", data=form, headers=headers)


def test_the_card_offers_the_form_filled_from_the_call(platform: Platform, alice: TestClient):
    job_id = ask(platform).job
    page = alice.get("/approvals").text
    card = page[page.index(f'id="card-{job_id}"') :]
    assert "Approve and allow similar" in card and "Approve and allow</button>" in card
    for name in CALL:
        assert f'<select name="match_{name}"' in card
    assert '<option value="exact" selected>exact (this value)</option>' in card
    # `delay-s` was left out: its default (0) is what runs, so it can be matched exactly too.
    assert re.search(r'name="match_delay-s".*?value="exact"', card, re.S)
    assert "not given in this call" not in card
    assert [d for d in ("15m", "1h", "8h") if f'<option value="{d}">' in card] == [
        "15m",
        "1h",
        "8h",
    ]
    assert f'<code class="requester">{BOT}</code>' in card
    assert f"allows every call of outbox send-message by {BOT} until it expires" in card
    assert 'name="password"' in card and 'data-change="approve-allow"' in card
    # The job page offers it too, and comes back to itself.
    job_page = alice.get(f"/jobs/{job_id}").text
    assert f'id="allow-similar-form-{job_id}"' in job_page
    assert '<input type="hidden" name="return_to" value="job">' in job_page


def test_approve_and_allow_approves_the_call_and_makes_the_rule(
    platform: Platform, alice: TestClient
) -> None:
    job_id = ask(platform).job or 0
    before = datetime.now(UTC)
    done = post(alice, job_id, similar_form(alice, platform, job_id) | {"password": PASSWORD})
    assert done.status_code == 200, done.text
    assert f"Approved job {job_id} and made rule 1: calls like it (to as in this" in done.text
    (rule,) = rulebook.listing(platform)
    assert (rule["effect"], rule["tool"], rule["action"]) == ("allow", "outbox", "send-message")
    assert rule["requester"] == BOT and rule["args"] == {"to": "bob@example.org"}
    assert rule["created_by"] == "alice" and rule["signed"]
    expires = datetime.fromisoformat(rule["expires_at"])
    assert timedelta(minutes=59) < expires - before < timedelta(minutes=61)
    # The approval and the rule, each audited as they are when made apart.
    approved = job(platform, job_id)
    assert approved.state is JobState.approved and approved.decided_by == "alice"
    assert [e.detail for e in events(platform, "rule-added")] == ["rule 1"]
    (event,) = events(platform, "approved")
    assert event.job_id == job_id and (event.detail or "").endswith("step-up: password")

    make_worker(platform).run_once()
    assert job(platform, job_id).state is JobState.succeeded
    # An identical call (the same requester and `to`; `any` on the rest) runs with no card.
    again = ask(platform, subject="another subject")
    assert again.allowed_by is not None and again.allowed_by["rule"] == 1
    assert again.allowed_by["by"] == "alice" and again.allowed_by["expires_at"]
    # Another recipient, or the same call without the agent's token, waits for an operator.
    assert ask(platform, to="eve@example.org").status.value == "pending_approval"
    assert ask(platform, agent=None).status.value == "pending_approval"


@pytest.mark.parametrize(("duration", "hours"), [("15m", 0.25), ("8h", 8.0)])
def test_any_on_every_argument_makes_a_rule_for_every_call(
    platform: Platform, alice: TestClient, duration: str, hours: float
) -> None:
    job_id = ask(platform).job or 0
    form = similar_form(alice, platform, job_id, exact=()) | {"duration": duration}
    before = datetime.now(UTC)
    done = post(alice, job_id, form | {"password": PASSWORD})
    assert done.status_code == 200
    assert f"every call of outbox send-message by {BOT} runs without asking" in done.text
    (rule,) = rulebook.listing(platform)
    assert rule["args"] == {} and rule["requester"] == BOT
    assert "when" not in rule["cedar"]  # no condition: every call of the action
    expires = datetime.fromisoformat(rule["expires_at"]) - before
    assert abs(expires - timedelta(hours=hours)) < timedelta(minutes=1)
    assert ask(platform, to="eve@example.org").allowed_by is not None


def test_exact_on_a_value_with_a_wildcard_matches_that_value_only(
    platform: Platform, alice: TestClient
) -> None:
    job_id = ask(platform, to="*@example.org").job or 0
    assert post(alice, job_id, similar_form(alice, platform, job_id) | {"password": PASSWORD})
    (rule,) = rulebook.listing(platform)
    assert rule["args"] == {"to": {"one_of": ["*@example.org"]}}  # not read as a glob
    assert ask(platform, to="eve@example.org").status.value == "pending_approval"
    assert ask(platform, to="*@example.org").allowed_by is not None


@pytest.mark.parametrize("text", ["Café", "\u202egnp.exe", "a\nb", "nul\x00"])
def test_allow_similar_on_any_text_makes_a_rule_that_works_and_breaks_nothing(
    platform: Platform, alice: TestClient, text: str
) -> None:
    job_id = ask(platform, subject=text).job or 0
    form = similar_form(alice, platform, job_id, exact=("subject",)) | {"password": PASSWORD}
    assert post(alice, job_id, form).status_code == 200
    (rule,) = rulebook.listing(platform)
    assert rule["args"] == {"subject": text} and not rulebook.in_force(platform).broken
    # The rule allows the same text, and nothing else; every other call and page still works.
    assert ask(platform, subject=text, to="eve@example.org").allowed_by is not None
    assert ask(platform, subject=text + "!").status.value == "pending_approval"
    greet = RunCall(kind="tool", name="hello-world", action="greet", args={"name": text})
    agent = Actor(surface=Surface.mcp_http, client="test-agent", agent=BOT)
    assert request_run(platform=platform, call=greet, actor=agent, consent=Consent.NONE).result
    assert alice.get("/approvals").status_code == 200 and alice.get("/rules").status_code == 200


def test_a_call_made_without_a_token_makes_a_rule_without_requester(
    platform: Platform, alice: TestClient
) -> None:
    job_id = ask(platform, agent=None).job or 0
    card = alice.get("/approvals").text
    assert "this call came without an agent token, so the rule names no requester" in card
    assert post(alice, job_id, similar_form(alice, platform, job_id) | {"password": PASSWORD})
    (rule,) = rulebook.listing(platform)
    assert rule["requester"] is None and rule["args"] == {"to": "bob@example.org"}
    assert ask(platform, agent=None).allowed_by is not None


def test_without_a_valid_step_up_nothing_is_made_or_approved(
    platform: Platform, alice: TestClient
) -> None:
    job_id = ask(platform).job or 0
    form = similar_form(alice, platform, job_id)
    missing = post(alice, job_id, form)
    assert missing.status_code == 403
    assert "approving and allowing similar calls needs your current password" in missing.text
    wrong = post(alice, job_id, form | {"password": "a guess"})
    assert wrong.status_code == 403 and "wrong password" in wrong.text
    assert rulebook.listing(platform) == []
    assert job(platform, job_id).state is JobState.pending_approval


def test_a_job_that_changed_or_was_decided_meanwhile_makes_no_rule(
    platform: Platform, alice: TestClient
) -> None:
    first, second = ask(platform).job or 0, ask(platform, subject="other").job or 0
    stale = similar_form(alice, platform, first) | {"password": PASSWORD}
    stale["digest"] = job(platform, second).args_digest
    changed = post(alice, first, stale)
    assert changed.status_code == 409
    assert "arguments are not the ones this page showed" in changed.text
    alice.post(f"/jobs/{first}/deny", data={"csrf_token": stale["csrf_token"]}, headers=ORIGIN)
    decided = post(alice, first, similar_form(alice, platform, first) | {"password": PASSWORD})
    assert decided.status_code == 409 and "no longer waiting" in decided.text
    with session_scope(platform.engine) as session:
        row = session.get(Job, second)
        assert row is not None
        row.expires_at = datetime.now(UTC) - timedelta(seconds=1)
        session.add(row)
    # Whether the approval finds it expired, or housekeeping marked it so just before.
    expired = post(alice, second, similar_form(alice, platform, second) | {"password": PASSWORD})
    assert expired.status_code == 409
    assert (
        f"job {second} expired before it was approved: it will not run, and no rule was made"
        in expired.text
    )
    assert rulebook.listing(platform) == []


def test_an_operator_who_may_not_make_rules_gets_no_button(
    platform: Platform, alice: TestClient, client_as: Callable[[str], TestClient]
) -> None:
    add_operator(platform, "bob", role="approver")
    bob = client_as("bob")
    job_id = ask(platform).job or 0
    page = bob.get("/approvals").text
    assert f'id="approve-{job_id}"' in page and "Approve and allow similar" not in page
    refused = post(bob, job_id, similar_form(bob, platform, job_id) | {"password": PASSWORD})
    assert refused.status_code == 403 and "only an admin may make rules" in refused.text
    assert rulebook.listing(platform) == []
    assert job(platform, job_id).state is JobState.pending_approval


def test_no_rule_stands_in_for_several_approvers(platform: Platform, alice: TestClient) -> None:
    platform.settings = platform.settings.model_copy(update={"approvals_required": 2})
    job_id = ask(platform).job or 0
    page = alice.get("/approvals").text
    assert f'id="approve-{job_id}"' in page and "Approve and allow similar" not in page
    refused = post(alice, job_id, similar_form(alice, platform, job_id) | {"password": PASSWORD})
    assert refused.status_code == 409 and "no rule stands in for them" in refused.text
    assert rulebook.listing(platform) == []


# -- passkeys: the proof is bound to the job and the rule's text together -----------------


@pytest.fixture
def local(app: Any, platform: Platform) -> Iterator[TestClient]:
    """Alice (admin), logged in at http://localhost:8000, where passkeys work."""
    add_operator(platform, "alice")
    with TestClient(app, base_url=LOCAL, follow_redirects=False) as client:
        r = client.post(
            "/login", data={"username": "alice", "password": PASSWORD}, headers=LOCAL_ORIGIN
        )
        assert r.status_code == 303, r.text
        yield client


def _post_json(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    headers = {**LOCAL_ORIGIN, "X-CSRF-Token": csrf(client, "/account")}
    return client.post(path, json=body, headers=headers)


def _with_passkey(client: TestClient) -> SoftAuthenticator:
    soft = SoftAuthenticator(origin=LOCAL)
    options = _post_json(client, "/account/passkeys/options", {"password": PASSWORD})
    added = _post_json(
        client, "/account/passkeys", {"credential": soft.register(options.json()), "label": "k"}
    )
    assert added.status_code == 200, added.text
    return soft


def _assertion(client: TestClient, soft: SoftAuthenticator, form: dict[str, str], job_id: int):
    """What static/passkeys.js sends for the card's form: a challenge for the job and the
    choices (the server computes the rule's text from them), then the assertion over it."""
    fields = {k: v for k, v in form.items() if k == "duration" or k.startswith("match_")}
    target = {"job": str(job_id), "digest": form["digest"], **fields}
    body = {"purpose": "change", "change": "approve-allow", "target": target}
    options = _post_json(client, "/stepup/options", body)
    assert options.status_code == 200, options.text
    return json.dumps(soft.assert_for(options.json()))


def test_a_passkey_confirms_only_this_job_with_this_rule(
    platform: Platform, local: TestClient
) -> None:
    soft = _with_passkey(local)
    first, second = ask(platform).job or 0, ask(platform, subject="other").job or 0
    exact_to = similar_form(local, platform, first)
    every_call = similar_form(local, platform, first, exact=())

    # Confirmed for a rule matching `to` exactly, sent with `any` everywhere: refused.
    swapped = every_call | {"passkey": _assertion(local, soft, exact_to, first)}
    refused = post(local, first, swapped, LOCAL)
    assert refused.status_code == 403 and "another call or change" in refused.text
    # Confirmed for this job, replayed for another job: refused.
    other = similar_form(local, platform, second)
    replayed = other | {"passkey": _assertion(local, soft, exact_to, first)}
    assert post(local, second, replayed, LOCAL).status_code == 403
    # A passkey confirmation of the approval alone makes no rule either.
    body = {"purpose": "approve", "digest": exact_to["digest"], "job_id": first}
    alone = json.dumps(soft.assert_for(_post_json(local, "/stepup/options", body).json()))
    assert post(local, first, exact_to | {"passkey": alone}, LOCAL).status_code == 403
    # Nor does one for this pair approve the call alone.
    approve = {k: exact_to[k] for k in ("csrf_token", "digest", "return_to")}
    approve["passkey"] = _assertion(local, soft, exact_to, first)
    assert (
        local.post(f"/jobs/{first}/approve", data=approve, headers=LOCAL_ORIGIN).status_code == 403
    )
    assert rulebook.listing(platform) == []
    assert job(platform, first).state is JobState.pending_approval
    assert job(platform, second).state is JobState.pending_approval

    # The assertion made for exactly this job and these choices: approved, rule made.
    done = post(
        local, first, exact_to | {"passkey": _assertion(local, soft, exact_to, first)}, LOCAL
    )
    assert done.status_code == 200, done.text
    assert job(platform, first).state is JobState.approved
    assert [r["args"] for r in rulebook.listing(platform)] == [{"to": "bob@example.org"}]
