"""Upstream MCP servers (SPEC §22): each server's page, with its tools, their state, their
pinned digests and the difference of a held definition, and an admin's Accept (step-up bound
to the held digests the page showed, through the trust door, audited), as
`aat servers accept` does."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException
from starlette.responses import Response

from dashboard import stepup
from dashboard.deps import AddressDep, CheckerDep, OperatorDep, ServerAccepterDep, View, ViewDep
from dashboard.forms import AcceptForm
from dashboard.render import QUIET, Notice
from webplatform import servers
from webplatform.trust import door
from webplatform.trust.stepup import Change, StepUpMismatch

router = APIRouter()

CHANGED = (
    "the held definitions changed since this page was drawn; read them again below, then accept"
)


def render_server(view: View, name: str, notice: Notice = QUIET) -> Response:
    """One upstream server as the store pinned it (the page does not start the server),
    with `notice` said above it."""
    try:
        shown = servers.details(view.platform, name, connect=False)
    except servers.ServerProblem as exc:
        raise HTTPException(404, str(exc)) from exc
    server = view.platform.registry().servers[name]
    held = " ".join(sorted(t["digest"] for t in shown["tools"] if t["state"] == "held"))
    context: dict[str, Any] = {"server": shown, "where": server.url or " ".join(server.command)}
    context |= {"held": held, **notice.shown()}
    return view.pages.render(view.request, "server.html", context, status_code=notice.status)


@router.get("/servers/{name}")
def server_page(view: ViewDep, _operator: OperatorDep, name: str) -> Response:
    """One upstream server: its tools, their state and digests, a held one's difference."""
    return render_server(view, name)


@router.post("/servers/{name}/accept")
def accept_held(
    view: ViewDep,
    checker: CheckerDep,
    admin: ServerAccepterDep,
    address: AddressDep,
    name: str,
    form: Annotated[AcceptForm, Form()],
) -> Response:
    """Accept the held definitions the page showed, confirmed with the admin's step-up bound
    to exactly those digests; a set that changed meanwhile is refused (409), accepting none."""
    try:
        servers.find(view.platform, name)
    except servers.ServerProblem as exc:
        raise HTTPException(404, str(exc)) from exc
    shown = frozenset(form.held.split())
    if not shown or shown != servers.held_digests(view.platform, name):
        return render_server(view, name, Notice.refused(CHANGED, 409))
    target = {"server": name, "held": " ".join(sorted(shown))}
    try:
        accepted = door.decide(
            checker,
            operator=admin,
            proof=form.proof(),
            bound=stepup.for_change(admin, Change.server_accept, target),
            address=address,
            record=lambda _step_up: servers.accept(view.platform, name, by=admin, shown=shown),
        )
    except (stepup.StepUpRefused, StepUpMismatch) as exc:
        return render_server(view, name, Notice.refused(str(exc), 403))
    done = f"Accepted {', '.join(accepted)}: offered to agents from now on."
    return render_server(view, name, Notice(done))
