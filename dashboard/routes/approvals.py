"""The live approval queue.

Live by polling: the queue block re-fetches itself every second with htmx (`hx-trigger=
"every 1s"`). Polling rather than server-sent events because it needs no extra htmx
extension, no long-lived connection per tab through proxies, no reconnect logic, and works
unchanged under the strict CSP; one small read-only query per tab per second is cheap, and
a new request shows up within the 2 s the spec asks for. The deny-reason inputs are
`hx-preserve`d, so a poll never wipes what the operator is typing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fastapi import APIRouter, Request
from starlette.responses import Response

from dashboard import data, stepup
from dashboard.deps import OperatorDep, View, ViewDep
from dashboard.render import QUIET, Notice, is_htmx
from webplatform.jobs import ruling
from webplatform.store.models import Job

router = APIRouter()
DONE = {"approved": "Approved", "denied": "Denied"}
# How the queue is laid out (SPEC §25): cards, or one line a call; grouped or not. Chosen
# with `view` and `group` in the query string and remembered by the browser in a cookie.
VIEWS = ("cards", "compact")
GROUPS = ("none", "agent", "tool")
LAYOUT_COOKIE = "aat_queue_layout"
LAYOUT_MAX_AGE = 365 * 24 * 3600


@dataclass(frozen=True)
class Layout:
    """The queue's layout: `view` (cards, compact) and `group` (none, agent, tool)."""

    view: str = "cards"
    group: str = "none"


def layout_of(request: Request) -> tuple[Layout, bool]:
    """The layout the query string asks for (then it is remembered: True), or else the one
    the browser remembers, or cards ungrouped. Unknown values are the defaults."""
    asked = {k: request.query_params.get(k) for k in ("view", "group")}
    if any(asked.values()):
        view, group = asked["view"], asked["group"]
        remember = True
    else:
        view, _, group = (request.cookies.get(LAYOUT_COOKIE) or "").partition(".")
        remember = False
    return (
        Layout(view=view if view in VIEWS else "cards", group=group if group in GROUPS else "none"),
        remember,
    )


def _remember(response: Response, layout: Layout) -> None:
    response.set_cookie(
        LAYOUT_COOKIE,
        f"{layout.view}.{layout.group}",
        max_age=LAYOUT_MAX_AGE,
        path="/",
        httponly=True,
        samesite="strict",
    )


def asker(job: Job) -> str:
    """Whom a call is grouped under by agent: the agent or operator that asked, or the
    client's own name, or how it came (`aat run`)."""
    return job.requested_by or job.client or job.surface.value


def grouped(
    slots: list[data.Card | data.Outcome], group: str
) -> list[tuple[str | None, list[data.Card | data.Outcome]]]:
    """The slots under a heading per agent or per tool (headings in order of their first
    call, calls in queue order within), or all under none."""
    if group == "none":
        return [(None, slots)]
    heads: dict[str, list[data.Card | data.Outcome]] = {}
    for slot in slots:
        job = slot.job
        key = f"asked by {asker(job)}" if group == "agent" else f"{job.name} {job.action}"
        heads.setdefault(key, []).append(slot)
    return list(heads.items())


def render_queue(
    view: View,
    notice: Notice = QUIET,
    *,
    block: str = "live",
    lines: list[tuple[bool, str]] | None = None,
) -> Response:
    """The approvals page, or one block of it for htmx (`live`: the polled queue;
    `notice`: the outcome of a decision), with an optional message (and, after deciding
    several at once, `lines`: one (decided?, text) per job).

    The page and order come from the query string (`page`, `order=newest`), so the polled
    block keeps showing the page the operator chose.
    """
    request, platform = view.request, view.platform
    newest_first = request.query_params.get("order") == "newest"
    try:
        page = int(request.query_params.get("page", "1"))
    except ValueError:
        page = 1
    operator = getattr(request.state, "operator", "")
    queue = data.approval_queue(platform, page=page, newest_first=newest_first)
    waiting = {card.job.id for card in queue.pending}
    gone = [i for i in _shown_ids(request.query_params) if i not in waiting]
    outcomes = data.outcomes(platform, gone, operator) if gone else []
    # The rules in force, on the whole page only: the polled block is read every second.
    rules = (
        []
        if is_htmx(request)
        else sorted(ruling.rules_now(platform).rules.items(), key=lambda kv: int(kv[0]))
    )
    layout, remember = layout_of(request)
    slots = _slots(queue.pending, outcomes, newest_first=newest_first)
    response = view.pages.render(
        request,
        "approvals.html",
        {
            "queue": queue,
            "groups": grouped(slots, layout.group),
            "layout": layout,
            "opened": set(_ids(request.query_params, ("open",))),
            "pending_count": queue.total,
            "order": "newest" if newest_first else "oldest",
            **stepup.passkey_context(platform, operator),
            **notice.shown(),
            "batch_lines": lines or [],
            "rules_in_force": rules,
        },
        block=block,
        status_code=notice.status,
        headers={"HX-Trigger": "queue-changed"} if block == "notice" else None,
    )
    if remember:
        _remember(response, layout)
    return response


def _shown_ids(params: Mapping[str, str]) -> list[int]:
    """The job ids whose cards this page showed (`shown`, sent by static/app.js; `job`, after
    a decision without JavaScript): their outcome is said where their card was."""
    return _ids(params, ("shown", "job"))[-data.OUTCOMES_SHOWN :]


def _ids(params: Mapping[str, str], keys: tuple[str, ...]) -> list[int]:
    """The job ids listed (comma-separated) under `keys` in the query string."""
    text = ",".join(params.get(key, "") for key in keys)
    return [int(part) for part in text.split(",") if part.strip().isdigit()]


def _slots(
    cards: list[data.Card], outcomes: list[data.Outcome], *, newest_first: bool
) -> list[data.Card | data.Outcome]:
    """The cards and the outcomes of cards that left, in the queue's order by job id, so an
    outcome stays where its card was."""
    both: list[data.Card | data.Outcome] = [*cards, *outcomes]
    return sorted(both, key=lambda slot: slot.job.id or 0, reverse=newest_first)


@router.get("/approvals")
def approvals_page(
    view: ViewDep,
    _operator: OperatorDep,
    done: str | None = None,
    job: int | None = None,
) -> Response:
    """Pending calls with Approve / Deny, and the recent decisions below them."""
    message = f"{DONE[done]} job {job}." if done in DONE and job is not None else None
    return render_queue(view, Notice(message))
