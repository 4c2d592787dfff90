"""The Agents page: mint agent tokens (shown once), list them with their last use, revoke.

Admin-only (`TokenMinterDep`). Minting gives an agent the right to ask in the admin's name, so it
needs a step-up bound to that token's name (the admin's password typed with it, or a
passkey); revoking takes rights away and needs none. A minted token is in exactly one
response, marked `no-store`; only its hash is kept, in a row aat signs.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form
from starlette.responses import Response

from dashboard import stepup
from dashboard.deps import AddressDep, CheckerDep, TokenMinterDep, View, ViewDep
from dashboard.forms import MintForm
from dashboard.render import QUIET, Notice
from webplatform.store import agents
from webplatform.trust import changes
from webplatform.trust.authority import report_forged
from webplatform.trust.stepup import Change, StepUpMismatch

router = APIRouter()


def render_agents(
    view: View,
    notice: Notice = QUIET,
    *,
    minted: tuple[str, str] | None = None,
) -> Response:
    """The page: every token (never a hash), and a just-minted token when there is one."""
    platform = view.platform
    rows = platform.tokens.listed()
    report_forged(platform)
    has_passkey = stepup.has_passkey(platform, getattr(view.request.state, "operator", ""))
    response = view.pages.render(
        view.request,
        "agents.html",
        {
            "agents": rows,
            "minted": minted,
            **notice.shown(),
            "has_passkey": has_passkey,
        },
        status_code=notice.status,
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/agents")
def agents_page(view: ViewDep, _admin: TokenMinterDep) -> Response:
    """The agent tokens and the form to mint one."""
    return render_agents(view)


@router.post("/agents")
def mint_agent(
    view: ViewDep,
    checker: CheckerDep,
    admin: TokenMinterDep,
    address: AddressDep,
    form: Annotated[MintForm, Form()],
) -> Response:
    """Mint a token owned by the logged-in operator, confirmed with their password (or a
    passkey) for exactly this name; the page shows it this once."""
    name = form.name.strip()
    try:
        step_up = stepup.verify(
            checker,
            operator=admin,
            proof=form.proof(),
            bound=stepup.for_change(admin, Change.agent_add, {"name": name}),
            address=address,
        )
        _row, token = changes.mint_agent(
            platform=view.platform, step_up=step_up, by=admin, name=name
        )
    except (stepup.StepUpRefused, StepUpMismatch) as exc:
        return render_agents(view, Notice.refused(str(exc), 403))
    except agents.AgentTokenError as exc:
        return render_agents(view, Notice.refused(str(exc), 422))
    return render_agents(view, minted=(name, token))


@router.post("/agents/{name}/revoke")
def revoke_agent(view: ViewDep, admin: TokenMinterDep, name: str) -> Response:
    """Revoke a token: its next `/mcp` request gets 401."""
    revoked = view.platform.tokens.revoke(name, actor=admin)
    if not revoked:
        return render_agents(view, Notice.refused(f"no active agent {name!r}", 409))
    return render_agents(view, Notice(f"Revoked agent {name}."))
