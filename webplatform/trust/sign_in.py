"""An operator answers an agent's browser sign-in (SPEC §18): what the dashboard's page shows,
and allowing it (with a step-up) or denying it. Only the dashboard imports this module.

Allowing makes a code that the agent's client exchanges for an agent token owned by the
operator (`webplatform.trust.oauth`); it needs the operator's step-up bound to exactly this
request and this agent name, and a role that may decide (a viewer cannot let an agent in).

Both answers send the browser to the client's redirect URI, which the operator saw on the
page (so it is verified, and the only place an error goes); both carry `iss`, the issuer
the request was made to (RFC 9207), so a client talking to several servers knows which
one answered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from mcp.server.auth.provider import AuthorizationParams, construct_redirect_uri
from sqlmodel import Session

from webplatform.platform import Platform
from webplatform.store import audit, operators
from webplatform.store import oauth as store
from webplatform.store.agents import NAME_PATTERN, name_taken
from webplatform.store.oauth import GrantError
from webplatform.store.seals import RowSeal
from webplatform.trust.authority import report_forged
from webplatform.trust.permissions import Decider, Permission, may
from webplatform.trust.stepup import Change, StepUp, change_digest, check_step_up

CODE_TTL = timedelta(minutes=2)

__all__ = ["GrantError", "SignInRequest", "allow", "deny", "pending", "target_of"]


@dataclass(frozen=True)
class SignInRequest:
    """What the operator sees before allowing a sign-in."""

    request_id: str
    client_id: str
    client_name: str
    redirect_uri: str
    resource: str | None
    scopes: tuple[str, ...]


def target_of(request_id: str, agent: str) -> dict[str, str]:
    """The change a step-up for this sign-in is bound to (the passkey form sends the same)."""
    return {"request": request_id, "agent": agent}


def pending(platform: Platform, request_id: str) -> SignInRequest | None:
    """The sign-in request waiting for an operator, or None (unknown, expired, answered)."""
    row = platform.sign_ins.pending(request_id)
    if row is None:
        return None
    params = AuthorizationParams.model_validate_json(row.params)
    return SignInRequest(
        request_id=request_id,
        client_id=row.client_id,
        client_name=row.client_name,
        redirect_uri=str(params.redirect_uri),
        resource=params.resource,
        scopes=tuple(params.scopes or ()),
    )


def allow(*, platform: Platform, step_up: StepUp, by: str, request_id: str, agent: str) -> str:
    """Allow the request for agent `agent` in `by`'s name; returns where to send the browser
    (the client's redirect URI with the code). GrantError says what was wrong."""
    digest = change_digest(
        operator=by, change=Change.agent_sign_in, target=target_of(request_id, agent)
    )
    check_step_up(step_up, operator=by, digest=digest)
    if not NAME_PATTERN.fullmatch(agent):
        raise GrantError(
            f"invalid agent name {agent!r}: use 1-64 letters, digits, '.', '_', '@' or '-'"
        )
    seal = platform.seal()

    def grant(session: Session) -> str:
        _require_decider(session, by, seal)
        if name_taken(session=session, name=agent):
            raise GrantError(f"agent {agent!r} already exists: pick another name")
        row, code = store.allow_grant(
            session=session, request_id=request_id, agent=agent, owner=by, seal=seal, ttl=CODE_TTL
        )
        audit.record_event(
            session,
            audit.AuditEntry(
                actor=by,
                event="agent-sign-in-allowed",
                detail=f"{agent} (client {row.client_id}; {step_up.describe()})",
            ),
        )
        params = AuthorizationParams.model_validate_json(row.params)
        return construct_redirect_uri(
            str(params.redirect_uri), code=code, state=params.state, iss=_issuer(row.params)
        )

    try:
        return platform.sign_ins.step(grant)
    finally:
        report_forged(platform)


def deny(*, platform: Platform, by: str, request_id: str) -> str | None:
    """Deny the request; returns where to send the browser (the redirect URI with
    `error=access_denied`), or None when it was not pending."""

    def drop(session: Session) -> str | None:
        row = store.drop_grant(session=session, request_id=request_id)
        if row is None:
            return None
        audit.record_event(
            session, audit.AuditEntry(actor=by, event="agent-sign-in-denied", detail=row.client_id)
        )
        params = AuthorizationParams.model_validate_json(row.params)
        return construct_redirect_uri(
            str(params.redirect_uri),
            error="access_denied",
            state=params.state,
            iss=_issuer(row.params),
        )

    return platform.sign_ins.step(drop)


def _issuer(params: str) -> str | None:
    """The issuer `/authorize` recorded with the request (`webplatform.trust.oauth`)."""
    issuer = json.loads(params).get("issuer")
    return issuer if isinstance(issuer, str) else None


def _require_decider(session: Session, name: str, seal: RowSeal) -> None:
    row = operators.find_operator(session=session, name=name, seal=seal)
    if row is None or not may(Decider(name=name, role=row.role), Permission.allow_sign_in):
        raise GrantError(
            f"{name} may not let agents in: only approvers and admins may (ask an admin)"
        )
