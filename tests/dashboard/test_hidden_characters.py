"""Cards show every character (SPEC §19): each class of invisible or blank-looking character
is written out (`\\u00ad`) with the warning, on the card and on the job page; a requester no
token vouched for is marked self-reported on cards, job pages and exports."""

from __future__ import annotations

import csv
import io

import pytest
from dash_helpers import queue_send
from fastapi.testclient import TestClient

from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store.models import Surface

WARNING = "invisible or direction-changing characters"
# One character of each class, and how it must be written out.
HIDDEN = {
    "soft hyphen (Cf)": ("\u00ad", "\\u00ad"),
    "tag character (Cf)": ("\U000e0041", "\\U000e0041"),
    "cancel tag (Cf)": ("\U000e007f", "\\U000e007f"),
    "Mongolian vowel separator (Cf)": ("\u180e", "\\u180e"),
    "deprecated format character (Cf)": ("\u206a", "\\u206a"),
    "private use (Co)": ("\ue000", "\\ue000"),
    "unassigned (Cn)": ("\u0378", "\\u0378"),
    "Hangul filler": ("\u3164", "\\u3164"),
    "Hangul choseong filler": ("\u115f", "\\u115f"),
    "Hangul jungseong filler": ("\u1160", "\\u1160"),
    "halfwidth Hangul filler": ("\uffa0", "\\uffa0"),
    "blank Braille pattern": ("\u2800", "\\u2800"),
    "variation selector": ("\ufe0f", "\\ufe0f"),
}


def _card(html: str, job: int) -> str:
    return html.split(f'id="card-{job}"')[1].split("</article>")[0]


@pytest.mark.parametrize("char, written", list(HIDDEN.values()), ids=list(HIDDEN))
def test_each_hidden_character_is_written_out_with_the_warning(
    platform: Platform, alice: TestClient, char: str, written: str
) -> None:
    job = queue_send(platform, subject=f"pay{char}now").job
    assert job is not None
    card = _card(alice.get("/approvals").text, job)
    page = alice.get(f"/jobs/{job}").text
    for html in (card, page):
        assert f"pay{written}now" in html
        assert char not in html
        assert WARNING in html


def test_plain_text_in_other_scripts_is_left_alone(platform: Platform, alice: TestClient) -> None:
    job = queue_send(platform, subject="café 中文 Привет").job
    assert job is not None
    card = _card(alice.get("/approvals").text, job)
    assert "café 中文 Привет" in card and WARNING not in card


def test_a_requester_no_token_vouched_for_is_marked_self_reported(
    platform: Platform, alice: TestClient
) -> None:
    """A tokenless client that names itself like a token agent still shows as its own word."""
    job = queue_send(platform, client="build-bot").job
    assert job is not None
    for where in ("/approvals", f"/jobs/{job}", "/jobs"):
        html = alice.get(where).text
        assert 'build-bot <small class="self-reported">(self-reported: no agent token)' in html
    rows = list(csv.DictReader(io.StringIO(alice.get("/jobs.csv").text)))
    [row] = [r for r in rows if r["id"] == str(job)]
    assert row["requested_by"] == "build-bot" and row["requester_proof"] == "self-reported"


def test_an_agent_token_is_not_marked_self_reported(platform: Platform, alice: TestClient) -> None:
    answer = request_run(
        platform=platform,
        call=RunCall(
            kind="tool",
            name="outbox",
            action="send-message",
            args={"to": "bob@example.org", "subject": "hi", "body": "hello"},
        ),
        actor=Actor(surface=Surface.mcp_http, client="build-bot", agent="build-bot"),
        consent=Consent.QUEUE,
    )
    html = alice.get(f"/jobs/{answer.job}").text
    assert "build-bot" in html and "self-reported" not in html
    rows = list(csv.DictReader(io.StringIO(alice.get("/jobs.csv").text)))
    [row] = [r for r in rows if r["id"] == str(answer.job)]
    assert row["requester_proof"] == "token"
