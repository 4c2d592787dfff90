"""aat as the authorization server of its own `/mcp` (SPEC §18): the provider the SDK's
`mcp.server.auth` handlers call.

The SDK's handlers parse and check the protocol (client, redirect URI, PKCE S256, expiry of
codes); this provider keeps the state and says what a grant is worth:

- `/authorize` records the request and sends the browser to the dashboard's page, where an
  operator names the agent and allows it with a step-up (`webplatform.trust.sign_in`);
- a code works once; using it again revokes the agent it made (RFC 6749 §4.1.2), also when
  the two uses race (the second finds the grant's row locked, then used);
- the access token is an agent token (§10) owned by that operator, bound to this server's
  `/mcp` (RFC 8707) and expiring after `AAT_OAUTH_TOKEN_TTL_S`;
- refresh tokens rotate, and one used again after its rotation revokes the agent, so
  every token of its family stops working (two uses racing included); a revoked agent
  refreshes nothing.

A refusal found inside a transaction is `Refusal` (rolled back with it); the revocation it
asks for runs after, in a transaction of its own, and the client then gets the SDK's
`TokenError` (`400 invalid_grant`). The SDK's errors are frozen dataclasses: raised through
the transaction's context manager, which sets their traceback, they would end as 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import anyio.to_thread
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, ValidationError
from sqlmodel import Session

from webplatform.platform import Platform
from webplatform.store import agents, audit
from webplatform.store import oauth as store
from webplatform.store.models import AgentTokenPublic, OAuthGrant, OAuthRefreshToken, utcnow
from webplatform.trust.authority import TOKENS_FILE, remember, report_forged
from webplatform.trust.oauth_clients import (
    ClientDocumentError,
    ClientDocuments,
    is_document_url,
    redirect_uri_problem,
)

logger = logging.getLogger(__name__)
REQUEST_TTL = timedelta(minutes=10)
T = TypeVar("T")
REUSED = "refresh token used again after it was rotated: the agent is revoked, sign in again"
CODE_REUSED = "authorization code already used: the agent it made is revoked, sign in again"


class UnknownClient(LookupError):
    """No client by that id: not registered, or its metadata document cannot be used."""


class Refusal(Exception):
    """A token request refused inside a transaction: `description` for the client, and the
    agent whose family to revoke once the transaction is rolled back (None: none)."""

    def __init__(self, description: str, *, revoke: str | None = None) -> None:
        super().__init__(description)
        self.description = description
        self.revoke = revoke


@dataclass(frozen=True)
class Site:
    """This aat as the asking request reaches it: `base` is scheme, host and root path."""

    base: str

    @property
    def resource(self) -> str:
        """The protected resource, `/mcp` (RFC 8707, RFC 9728)."""
        return self.base + "/mcp"

    @property
    def consent_page(self) -> str:
        """The dashboard page where an operator allows a sign-in."""
        return self.base + "/agents/connect"


def same_resource(given: str | None, expected: str) -> bool:
    """True when `given` names `expected` (compared as URLs, a trailing slash aside)."""
    try:
        url = str(AnyHttpUrl(given or ""))
    except ValidationError:
        return False
    return url.removesuffix("/") == str(AnyHttpUrl(expected)).removesuffix("/")


class AatCode(AuthorizationCode):
    """An allowed grant's code, with the agent it makes."""

    grant_id: int
    agent: str
    owner: str


class AatRefresh(RefreshToken):
    """A refresh token with its row and agent."""

    refresh_id: int
    agent: str


class SignInProvider(OAuthAuthorizationServerProvider[AatCode, AatRefresh, AccessToken]):
    """The SDK's provider protocol over aat's store, for requests that reached `site`."""

    def __init__(self, platform: Platform, *, site: Site, documents: ClientDocuments) -> None:
        self.platform = platform
        self.site = site
        self.documents = documents

    async def _step(self, fn: Callable[[Session], T], *, write: bool = True) -> T:
        return await self._off_loop(lambda: self.platform.sign_ins.step(fn, write=write))

    async def _off_loop(self, call: Callable[[], T]) -> T:
        """`call()` (a store object's method) on a worker thread, then the forged rows it
        met reported."""
        try:
            return await anyio.to_thread.run_sync(call)
        finally:
            report_forged(self.platform)

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        """A metadata-document client (fetched) or a registered one (stored)."""
        try:
            return await self.find_client(client_id)
        except UnknownClient:
            return None

    async def find_client(self, client_id: str) -> OAuthClientInformationFull:
        """The client `client_id` names; UnknownClient says why there is none (one line)."""
        if is_document_url(client_id):
            try:
                return await self.documents.get(client_id)
            except ClientDocumentError as exc:
                logger.warning("sign-in refused: %s", exc)
                raise UnknownClient(str(exc)) from None
        info = await self._off_loop(lambda: self.platform.sign_ins.client(client_id))
        if info is None:
            raise UnknownClient(
                f"no client {client_id[:200]!r} is registered here: the client must register again"
            )
        return OAuthClientInformationFull.model_validate_json(info)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        """Keep a dynamically registered client (RFC 7591) as a public one.

        PKCE proves the code's holder, so no client secret is issued, and none is stored: the
        SDK's handler answers with this same record, which RFC 7591 §3.2.1 lets the server
        change (`token_endpoint_auth_method: none`). Its redirect URIs must be `https` or
        loopback `http` (`invalid_redirect_uri` otherwise): registering needs no login, so
        anything else would let anyone point aat's origin wherever they like."""
        if not client_info.redirect_uris:
            raise RegistrationError("invalid_redirect_uri", "register at least one redirect URI")
        for uri in client_info.redirect_uris:
            if (problem := redirect_uri_problem(uri)) is not None:
                raise RegistrationError("invalid_redirect_uri", problem)
        client_info.token_endpoint_auth_method = "none"
        client_info.client_secret = None
        client_info.client_secret_expires_at = None
        info = client_info.model_dump_json(exclude_none=True)
        client_id = client_info.client_id
        await self._off_loop(lambda: self.platform.sign_ins.register(client_id, info))

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        """Record the request and send the browser to the dashboard's page for it."""
        if params.resource is not None and not same_resource(params.resource, self.site.resource):
            raise AuthorizeError(
                "invalid_target", f"this server issues tokens only for {self.site.resource}"
            )
        bound_params = params.model_copy(update={"resource": self.site.resource})
        # The issuer goes back to the client with the code or the denial (RFC 9207 `iss`).
        bound = json.dumps({**bound_params.model_dump(mode="json"), "issuer": self.site.base})
        name = client.client_name or client.client_id
        request_id = await self._off_loop(
            lambda: self.platform.sign_ins.open(client.client_id, name, bound, REQUEST_TTL)
        )
        return f"{self.site.consent_page}?request={request_id}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AatCode | None:
        """The allowed grant for this code; a code used before revokes its agent instead."""
        row = await self._off_loop(lambda: self.platform.sign_ins.code(authorization_code))
        if row is None or row.client_id != client.client_id or not row.agent:
            return None
        if row.used_at is not None:
            await self._revoke_family(row.agent, "authorization code used twice")
            return None
        return _code_of(row, authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AatCode
    ) -> OAuthToken:
        """Make the agent (owned by the operator who allowed it) and its first tokens."""
        code = authorization_code
        seal = self.platform.seal()
        expires = utcnow() + self._ttl

        def make(session: Session) -> tuple[str, str]:
            if not store.use_code(session=session, grant_id=code.grant_id, seal=seal):
                # Used since it was loaded: two uses raced, this one lost.
                raise Refusal(CODE_REUSED, revoke=code.agent)
            try:
                agents.add_agent(
                    session=session, name=code.agent, owner=code.owner, seal=seal, actor=code.owner
                )
            except agents.AgentTokenError as exc:
                # Another agent took the name since it was allowed (or its owner left): that
                # agent is not this code's to revoke.
                raise Refusal(f"{exc}, then sign in again") from None
            resource = code.resource or self.site.resource
            access = agents.rotate_agent_token(
                session=session, name=code.agent, seal=seal, expires_at=expires, resource=resource
            )
            assert access is not None  # just made, active and signed
            refresh = _first_refresh(code, client.client_id, resource, self._refresh_ttl)
            token = store.add_refresh(session=session, template=refresh, seal=seal)
            audit.record_event(
                session,
                audit.AuditEntry(
                    actor=code.owner,
                    event="agent-signed-in",
                    detail=f"{code.agent} (client {client.client_id})",
                ),
            )
            return access, token

        access, refresh = await self._granted(make)
        remember(self.platform, TOKENS_FILE)
        return self._tokens(access, refresh, code.scopes)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> AatRefresh | None:
        """The refresh token while it and its agent are good; a rotated one used again
        revokes the agent (and so the whole family).

        The token and its agent are read in one transaction holding the token's row: a
        rotation racing this read waits for it, or is seen whole (its agent row and what
        aat remembers of the row it replaced agree), never half."""
        seal = self.platform.seal()

        def read(session: Session) -> tuple[OAuthRefreshToken, AgentTokenPublic | None] | None:
            row = store.find_refresh(session=session, token=refresh_token, seal=seal, lock=True)
            if row is None or row.rotated_at is not None:
                return None if row is None else (row, None)
            return row, agents.active_agent(session=session, name=row.agent, seal=seal)

        found = await self._step(read)
        if found is None or found[0].client_id != client.client_id or found[0].id is None:
            return None
        row, agent = found
        if row.rotated_at is not None:
            await self._revoke_family(row.agent, REUSED)
            return None
        if agent is None:
            return None
        return AatRefresh(
            token=refresh_token,
            client_id=row.client_id,
            scopes=row.scopes.split(),
            expires_at=int(row.expires_at.timestamp()),
            resource=row.resource,
            subject=agent.owner,
            refresh_id=row.id,
            agent=row.agent,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: AatRefresh, scopes: list[str]
    ) -> OAuthToken:
        """Rotate: the old refresh token is spent, the agent gets a new access token."""
        old = refresh_token
        seal = self.platform.seal()
        expires = utcnow() + self._ttl
        resource = old.resource or self.site.resource

        def rotate(session: Session) -> tuple[str, str]:
            if not store.rotate_refresh(session=session, refresh_id=old.refresh_id, seal=seal):
                # Rotated since it was loaded: two uses raced, and one of them is a replay.
                raise Refusal(REUSED, revoke=old.agent)
            access = agents.rotate_agent_token(
                session=session, name=old.agent, seal=seal, expires_at=expires, resource=resource
            )
            if access is None:
                raise Refusal(f"agent {old.agent} is revoked: sign in again")
            template = OAuthRefreshToken(
                token_hash="",
                agent=old.agent,
                client_id=client.client_id,
                resource=resource,
                scopes=" ".join(scopes),
                expires_at=utcnow() + self._refresh_ttl,
            )
            return access, store.add_refresh(session=session, template=template, seal=seal)

        access, refresh = await self._granted(rotate)
        return self._tokens(access, refresh, scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        """The agent token `token` as the SDK's access token, while it is valid."""
        agent = await self._off_loop(lambda: self.platform.tokens.by_token(token))
        if agent is None:
            return None
        expires = int(agent.expires_at.timestamp()) if agent.expires_at else None
        return AccessToken(
            token=token,
            client_id=agent.name,
            scopes=[],
            expires_at=expires,
            resource=agent.resource,
            subject=agent.owner,
        )

    async def revoke_token(self, token: AccessToken | AatRefresh) -> None:
        """Revoke the agent the token belongs to, and with it every token of the family."""
        name = token.agent if isinstance(token, AatRefresh) else token.client_id
        await self._revoke_family(name, "token revoked by its client")

    async def _granted(self, fn: Callable[[Session], T]) -> T:
        """`fn`'s tokens; a `Refusal` it raised becomes the SDK's `TokenError`, after the
        revocation it asks for (outside the rolled-back transaction, so it holds)."""
        try:
            return await self._step(fn)
        except Refusal as exc:
            refusal = exc
        if refusal.revoke is not None:
            await self._revoke_family(refusal.revoke, refusal.description)
        raise TokenError("invalid_grant", refusal.description)

    async def _revoke_family(self, agent: str, why: str) -> None:
        logger.warning("agent %s revoked: %s", agent, why)
        await self._off_loop(lambda: self.platform.sign_ins.revoke_family(agent, why))

    @property
    def _ttl(self) -> timedelta:
        return timedelta(seconds=self.platform.settings.oauth_token_ttl_s)

    @property
    def _refresh_ttl(self) -> timedelta:
        return timedelta(seconds=self.platform.settings.oauth_refresh_ttl_s)

    def _tokens(self, access: str, refresh: str, scopes: list[str]) -> OAuthToken:
        return OAuthToken(
            access_token=access,
            expires_in=self.platform.settings.oauth_token_ttl_s,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )


def _code_of(row: OAuthGrant, code: str) -> AatCode:
    params = AuthorizationParams.model_validate_json(row.params)
    assert row.id is not None and row.agent is not None and row.owner is not None
    return AatCode(
        code=code,
        scopes=params.scopes or [],
        expires_at=row.expires_at.timestamp(),
        client_id=row.client_id,
        code_challenge=params.code_challenge,
        redirect_uri=params.redirect_uri,
        redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
        resource=params.resource,
        subject=row.owner,
        grant_id=row.id,
        agent=row.agent,
        owner=row.owner,
    )


def _first_refresh(
    code: AatCode, client_id: str, resource: str, ttl: timedelta
) -> OAuthRefreshToken:
    return OAuthRefreshToken(
        token_hash="",
        agent=code.agent,
        client_id=client_id,
        resource=resource,
        scopes=" ".join(code.scopes),
        expires_at=utcnow() + ttl,
    )
