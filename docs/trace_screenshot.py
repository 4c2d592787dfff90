"""Make docs/approval-trace.png: one approval's trace, as a local OTLP/HTTP receiver decoded it.

It runs a real `aat serve` whose only tracing setting is the standard `OTEL_*` variables,
pointed at tests/otlp_receiver.py (which decodes the protobuf aat sends with
`opentelemetry-proto`). An MCP client asks for an irreversible `outbox send-message` with a
known W3C `traceparent`; an operator approves it in headless Chromium with her password; the
spans of that one trace are drawn as a waterfall (an HTML page made here) and Chromium takes
the screenshot. Run from the repository's root: `.venv/bin/python docs/trace_screenshot.py`.
"""

from __future__ import annotations

import asyncio
import html
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from mcp import Client
from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from otlp_receiver import Span, otel_env, receiver  # noqa: E402 (the tests' own receiver)
from serving import aat_env, aat_serve, free_port  # noqa: E402

OUT = ROOT / "docs" / "approval-trace.png"
CHROMIUM = "/usr/bin/chromium"
OPERATOR, PASSWORD = "alice", "correct horse battery"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "release notes", "body": "v1.4 is out"},
}
# What each span's row shows besides its name (never an argument's value: none is sent).
SHOWN = (
    "gen_ai.tool.name",
    "network.transport",
    "aat.job.id",
    "aat.approval.status",
    "aat.approval.approver",
    "aat.args.digest",
)


def main() -> None:
    """Run the call, approve it, draw its trace, and write the screenshot."""
    with tempfile.TemporaryDirectory() as tmp, receiver() as (url, received):
        home, port = Path(tmp) / "aat-home", free_port()
        env = aat_env(
            home, **{**otel_env(url), "OTEL_SERVICE_NAME": "aat"}, AAT_APPROVAL_WAIT_S="120"
        )
        subprocess.run(
            [sys.executable, "-m", "webplatform", "operator", "add", OPERATOR, "--password-stdin"],
            input=PASSWORD + "\n",
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        with aat_serve(env=env, port=port, log=Path(tmp) / "serve.log") as base:
            answer: list[object] = []
            call = threading.Thread(target=lambda: answer.append(asyncio.run(_ask(base))))
            call.start()
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless"])
                page = browser.new_page(viewport={"width": 1100, "height": 700})
                _approve(page, base)
                call.join(timeout=120)
                spans = received.wait_for(
                    lambda s: (
                        {"aat.run", "tools/call run_tool_confirmed"}
                        <= {x.name for x in s if x.trace_id == TRACE_ID}
                    )
                )
                # A blank page of its own: the dashboard's CSP would refuse the inline style.
                drawn = browser.new_page(viewport={"width": 1100, "height": 400})
                drawn.set_content(_waterfall([s for s in spans if s.trace_id == TRACE_ID]))
                drawn.locator("figure").screenshot(path=str(OUT))
                browser.close()
    sys.stdout.write(f"wrote {OUT.relative_to(ROOT)}\n")


async def _ask(base: str) -> object:
    """The agent's call, carrying its own trace context; it waits for the operator."""
    async with Client(f"{base}/mcp", mode="legacy") as client:
        return await client.call_tool("run_tool_confirmed", SEND, meta={"traceparent": TRACEPARENT})


def _approve(page: Page, base: str) -> None:
    """The operator logs in, waits for the card's preview, and approves with her password."""
    page.goto(f"{base}/login")
    page.fill("input[name=username]", OPERATOR)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{base}/approvals")
    card = page.locator("article.card[data-job-id]").first
    card.locator("input[name=preview]").first.wait_for(state="attached", timeout=60_000)
    page.reload()  # the card as it shows the landed preview, which the approval binds
    card.locator(".approve-form input[name=password]").fill(PASSWORD)
    card.get_by_role("button", name="Approve", exact=True).click()
    page.locator(".outcome.ok").first.wait_for(timeout=30_000)


def _short(key: str, value: object) -> str:
    """An attribute's value as its row shows it: a digest's first 12 characters."""
    text = str(value)
    return text[:12] + "…" if key == "aat.args.digest" else text


def _waterfall(spans: list[Span]) -> str:
    """The spans as rows under their parents, each with a bar at its time in the trace."""
    start = min(s.start_ns for s in spans)
    total = max(s.end_ns for s in spans) - start or 1
    ids = {s.span_id for s in spans}
    rows: list[str] = []

    def add(span: Span, depth: int) -> None:
        left = 100 * (span.start_ns - start) / total
        width = max(0.4, 100 * (span.end_ns - span.start_ns) / total)
        facts = " · ".join(
            f"{k}={_short(k, span.attributes[k])}" for k in SHOWN if k in span.attributes
        )
        rows.append(
            f'<tr><td style="padding-left:{depth * 1.2 + 0.3}rem"><b>{html.escape(span.name)}</b>'
            f"<br><small>{html.escape(facts)}</small></td>"
            f'<td class="ms">{(span.end_ns - span.start_ns) / 1e6:,.0f} ms</td>'
            f'<td class="lane"><div class="bar" style="left:{left:.2f}%;width:{width:.2f}%">'
            "</div></td></tr>"
        )
        for child in sorted(
            (c for c in spans if c.parent_span_id == span.span_id), key=lambda c: c.start_ns
        ):
            add(child, depth + 1)

    for root in sorted((s for s in spans if s.parent_span_id not in ids), key=lambda s: s.start_ns):
        add(root, 0)
    caption = (
        f"Trace {TRACE_ID} of one approved call: {len(spans)} spans sent by aat serve "
        "over OTLP/HTTP, decoded by tests/otlp_receiver.py (opentelemetry-proto) and drawn by "
        "docs/trace_screenshot.py. The agent's own span (the traceparent's parent) is not "
        "shown: the agent sent it nowhere."
    )
    return f"""<!doctype html><html><head><style>
      body {{ font: 14px system-ui, sans-serif; margin: 0; background: #fff; color: #1d232a; }}
      figure {{ margin: 0; padding: 16px; width: 1060px; }}
      table {{ border-collapse: collapse; width: 100%; }}
      td {{ border-bottom: 1px solid #d9dee3; padding: 6px 8px; vertical-align: middle; }}
      td small {{ color: #5b6670; font-family: ui-monospace, monospace; font-size: 11px; }}
      td.ms {{ text-align: right; white-space: nowrap; width: 70px; }}
      td.lane {{ position: relative; width: 45%; }}
      .bar {{ position: absolute; top: 30%; height: 40%; background: #1f5fbf; border-radius: 3px; }}
      figcaption {{ margin-top: 10px; color: #5b6670; font-size: 12px; }}
    </style></head><body><figure><table>{"".join(rows)}</table>
    <figcaption>{html.escape(caption)}</figcaption></figure></body></html>"""


if __name__ == "__main__":
    main()
