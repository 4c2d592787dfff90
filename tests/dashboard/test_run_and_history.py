"""The run form, job history with filters and paging, exports, and the registry browser."""

from __future__ import annotations

import csv
import io

from dash_helpers import ORIGIN, PASSWORD, csrf, queue_send
from openpyxl import load_workbook

from webplatform.jobs import states as jobs
from webplatform.store.engine import session_scope


def _post_run(client, path, fields, **extra):
    data = {"csrf_token": csrf(client, path), **{f"arg:{k}": v for k, v in fields.items()}, **extra}
    return client.post(path, data=data, headers=ORIGIN)


def test_run_form_widgets_follow_the_argument_types(alice):
    html = alice.get("/run/tool/outbox/send-message").text
    assert 'name="arg:delay-s" inputmode="decimal"' in html
    assert 'name="arg:to"' in html and "required" in html


def test_wrong_type_values_get_a_message_and_nothing_is_lost(alice, platform):
    path = "/run/tool/outbox/send-message"
    r = _post_run(
        alice,
        path,
        {"to": "bob@example.org", "subject": "Grüße", "body": "long text", "delay-s": "soon"},
    )
    assert r.status_code == 400
    assert "argument &#39;delay-s&#39; must be a number" in r.text
    assert 'value="bob@example.org"' in r.text and 'value="Grüße"' in r.text
    assert 'value="soon"' in r.text
    with session_scope(platform.engine) as session:
        assert jobs.list_jobs(session=session) == []


def test_missing_required_argument_is_named(alice):
    r = _post_run(alice, "/run/tool/hello-world/greet", {"name": ""})
    assert r.status_code == 400 and "missing required argument &#39;name&#39;" in r.text


def test_reversible_run_goes_straight_to_its_job(alice, platform):
    r = _post_run(alice, "/run/tool/hello-world/greet", {"name": "Zoë"})
    assert r.status_code == 303
    page = alice.get(r.headers["location"]).text
    assert "succeeded" in page and "Hello, Zoë!" in page
    assert "Re-run</button>" in page, "a finished job offers a re-run"


def test_irreversible_run_needs_the_confirm_step_and_records_the_operator(alice, platform):
    path = "/run/tool/outbox/send-message"
    fields = {"to": "bob@example.org", "subject": "s", "body": "b"}
    confirm = _post_run(alice, path, fields)
    assert confirm.status_code == 200 and "Confirm and run" in confirm.text
    assert "&#34;to&#34;: &#34;bob@example.org&#34;" in confirm.text
    with session_scope(platform.engine) as session:
        assert jobs.list_jobs(session=session) == []
    # Confirming is approving: it needs the same step-up as the card's Approve.
    for refused in [{}, {"password": "not the password"}]:
        r = _post_run(alice, path, fields, confirm="yes", **refused)
        assert r.status_code == 403 and "password" in r.text and "Confirm and run" in r.text
        with session_scope(platform.engine) as session:
            assert jobs.list_jobs(session=session) == []
    r = _post_run(alice, path, fields, confirm="yes", password=PASSWORD)
    assert r.status_code == 303
    job_id = int(r.headers["location"].rsplit("/", 1)[1])
    with session_scope(platform.engine) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        assert job.state.value == "approved" and job.decided_by == "alice"
    page = alice.get(f"/jobs/{job_id}").text
    assert "approved by</dt><dd>alice" in page and "step-up: password" in page
    assert PASSWORD not in page
    assert "Re-run" not in page, "an unfinished job offers no re-run"


def test_job_filters_paging_and_exports(alice, platform):
    # Three agents: one may keep only AAT_MAX_PENDING (20) calls waiting.
    ids = [queue_send(platform, client=f"agent-{i // 20}", subject=f"s{i}").job for i in range(60)]
    _post_run(alice, "/run/tool/hello-world/greet", {"name": "x"})
    first = alice.get("/jobs?state=pending_approval").text
    assert f'href="/jobs/{ids[-1]}"' in first and f'href="/jobs/{ids[0]}"' not in first
    assert f"before_id={ids[-50]}" in first
    second = alice.get(f"/jobs?state=pending_approval&before_id={ids[-50]}").text
    assert f'href="/jobs/{ids[0]}"' in second and f'href="/jobs/{ids[-1]}"' not in second
    assert "hello-world" not in alice.get("/jobs?tool=outbox").text.split("<tbody>")[1]
    assert "unknown state" in alice.get("/jobs?state=bogus").text
    rows = list(csv.reader(io.StringIO(alice.get("/jobs.csv?tool=hello-world").text)))
    assert rows[0][:4] == ["id", "created_at", "kind", "name"] and len(rows) == 2
    book = load_workbook(io.BytesIO(alice.get("/jobs.xlsx?state=pending_approval").content))
    assert book["jobs"].max_row == 61


def test_registry_search_and_schema(alice):
    r = alice.get("/registry?q=send", headers={"HX-Request": "true"})
    assert r.text.lstrip().startswith('<section id="registry-results"')
    assert "send-message" in r.text and "hello-world" not in r.text
    full = alice.get("/registry?q=send").text
    assert 'hx-get="/registry"' in full and 'action="/registry"' in full
    tool = alice.get("/registry/tool/outbox").text
    assert "<code>delay-s</code>" in tool and "irreversible" in tool and "read-only" in tool
    assert "run_tool_confirmed" in tool
    assert "aat run outbox send-message --to TO --subject SUBJECT --body BODY" in tool
    # What the tool may reach on the network (SPEC §17), on its page and its search hit.
    assert 'network <code class="network">none</code>' in tool
    # What one call may use (SPEC §20), beside it.
    limits = "64 processes, 512 MB memory, 256 MB per file and scratch, 256 open files"
    assert f'limits <code class="limits">{limits}</code>' in tool
    listing = alice.get("/registry?q=outbox").text
    assert "network <code>none</code>" in listing
    assert alice.get("/registry/tool/nope").status_code == 404


def test_skill_markdown_is_rendered_without_raw_html(alice):
    html = alice.get("/skills/approvals").text
    assert "<h1>" in html or "<h2>" in html or "<p>" in html


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def test_csv_export_quotes_every_cell_and_neutralises_formulas(alice, platform):
    # The client name is whatever an MCP client declares: an attacker's formula.
    for name in ("=cmd|' /C calc'!A0", 'x;=HYPERLINK("http://evil.example")', "a,@SUM(1+1)"):
        queue_send(platform, client=name)
    text = alice.get("/jobs.csv").text
    lines = text.splitlines()
    assert all(line.startswith('"') and line.endswith('"') for line in lines), lines[:3]
    for delimiter in (",", ";"):
        for row in csv.reader(io.StringIO(text), delimiter=delimiter):
            for cell in row:
                assert not cell.lstrip('"').startswith(FORMULA_START), (delimiter, cell)
    rows = list(csv.reader(io.StringIO(text)))
    assert "'=cmd|' /C calc'!A0" in [r[8] for r in rows]
