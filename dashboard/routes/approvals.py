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

from fastapi import APIRouter
from starlette.responses import Response

from dashboard import data, stepup
from dashboard.deps import OperatorDep, View, ViewDep
from dashboard.render import is_htmx
from webplatform.jobs import ruling

router = APIRouter()
DONE = {"approved": "Approved", "denied": "Denied"}


def render_queue(
    view: View,
    *,
    message: str | None = None,
    error: str | None = None,
    status_code: int = 200,
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
    return view.pages.render(
        request,
        "approvals.html",
        {
            "queue": queue,
            "slots": _slots(queue.pending, outcomes, newest_first=newest_first),
            "pending_count": queue.total,
            "order": "newest" if newest_first else "oldest",
            **stepup.passkey_context(platform, operator),
            "message": message,
            "error": error,
            "batch_lines": lines or [],
            "rules_in_force": rules,
        },
        block=block,
        status_code=status_code,
        headers={"HX-Trigger": "queue-changed"} if block == "notice" else None,
    )


def _shown_ids(params: Mapping[str, str]) -> list[int]:
    """The job ids whose cards this page showed (`shown`, sent by static/app.js; `job`, after
    a decision without JavaScript): their outcome is said where their card was."""
    text = ",".join(params.get(key, "") for key in ("shown", "job"))
    ids = [int(part) for part in text.split(",") if part.strip().isdigit()]
    return ids[-data.OUTCOMES_SHOWN :]


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
    return render_queue(view, message=message)
