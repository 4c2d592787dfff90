"""403 pages that name what was refused (SPEC §25): an operator without a permission who
opens a page, or posts to one, is told which permission, which roles hold it and who can
grant it; an htmx request gets that as a fragment for the page's `#notice`."""

from __future__ import annotations

import re
from typing import Any

from dash_helpers import ORIGIN, PASSWORD, add_operator, csrf, queue_send

from webplatform.platform import Platform
from webplatform.store.models import JobState

HTMX = {**ORIGIN, "HX-Request": "true"}


def _text(html: str) -> str:
    """The page's words, tags and line breaks gone, as a reader sees them."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_opening_a_page_without_its_permission_names_it_and_who_can_grant_it(
    platform: Platform, client_as: Any
) -> None:
    add_operator(platform, "ada")  # the first operator: an admin
    add_operator(platform, "bo", "approver")
    bo = client_as("bo")
    page = bo.get("/rules")
    assert page.status_code == 403
    assert "<title>Not allowed: make rules · aat</title>" in page.text
    said = _text(page.text)
    assert (
        "Refused: the make rules permission (only an admin may make rules; bo is not one)." in said
    )
    assert "It is held by the admin role; who can grant it: ada (admin)" in said
    assert "aat operator role bo --role admin" in said
    assert "Forbidden" not in page.text


def test_a_viewers_htmx_approve_gets_the_refusal_as_a_fragment_for_the_notice(
    platform: Platform, client_as: Any
) -> None:
    add_operator(platform, "ada")
    add_operator(platform, "cy", "admin")
    add_operator(platform, "bo", "approver")  # holds approve, but grants nothing
    add_operator(platform, "vic", "viewer")
    vic = client_as("vic")
    job_id = queue_send(platform, subject="refused").job
    assert job_id is not None
    job = platform.jobs.get(job_id)
    assert job is not None
    form = {"csrf_token": csrf(vic), "password": PASSWORD, "digest": job.args_digest}
    form["return_to"] = "approvals"
    approve = vic.post(f"/jobs/{job_id}/approve", data=form, headers=HTMX)
    assert approve.status_code == 403
    assert approve.headers["hx-retarget"] == "#notice"
    assert approve.headers["hx-reswap"] == "innerHTML"
    assert "<html" not in approve.text and 'class="notice error' in approve.text
    said = _text(approve.text)
    assert "Refused: the approve permission (vic is a viewer: viewers see every call" in said
    assert "held by the admin and approver roles" in said
    assert "who can grant it: ada, cy (admin)" in said
    assert "aat operator role vic --role approver" in said

    deny = vic.post(f"/jobs/{job_id}/deny", data={"csrf_token": csrf(vic)}, headers=HTMX)
    assert deny.status_code == 403 and "Refused: the deny permission (" in _text(deny.text)
    after = platform.jobs.get(job_id)
    assert after is not None and after.state is JobState.pending_approval
