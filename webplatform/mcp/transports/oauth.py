"""`/mcp` as an OAuth protected resource, and aat as its authorization server (SPEC §18).

Built from the SDK's `mcp.server.auth` handlers (metadata, `/authorize`, `/token`,
`/register`) over `webplatform.trust.oauth.SignInProvider`. The metadata and every URL in it
are made per request from the address the client used (`site_of`): a client that reached
aat as `localhost` gets `localhost` URLs, so the resource it asks a token for is the one it
calls. Tokens are issued only for this server's `/mcp` (RFC 8707): any other `resource` is
refused with `invalid_target`, at `/authorize` and at `/token`.

`/authorize` sends no error to the client's redirect URI: registering a client needs no
login, so a redirect URI is not verified until an operator has seen it on the dashboard's
page (whose Deny sends `access_denied` there). Until then every refusal (a malformed
request, an unknown client, a document that cannot be fetched, a redirect URI not the
client's, another resource) is `SignInRefused`, which the dashboard shows as a page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from mcp.server.auth.errors import stringify_pydantic_error
from mcp.server.auth.handlers.authorize import AuthorizationRequest
from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import ClientAuthenticator
from mcp.server.auth.provider import AuthorizationParams, AuthorizeError
from mcp.server.auth.routes import build_metadata, cors_middleware
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.shared.auth import (
    InvalidRedirectUriError,
    InvalidScopeError,
    OAuthClientInformationFull,
    OAuthMetadata,
    ProtectedResourceMetadata,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import AnyUrl, ValidationError
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route, request_response
from starlette.types import ASGIApp, Scope

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.trust.oauth import SignInProvider, Site, UnknownClient, same_resource
from webplatform.trust.oauth_clients import ClientDocuments, is_document_url, redirect_uri_problem

RESOURCE_METADATA = "/.well-known/oauth-protected-resource"
SERVER_METADATA = "/.well-known/oauth-authorization-server"
# The paths the dashboard's guard passes through without a session (as it does `/mcp`):
# clients call them with no cookie, and `/authorize` only sends the browser on.
OAUTH_PATHS = frozenset(
    {
        RESOURCE_METADATA,
        RESOURCE_METADATA + "/mcp",
        SERVER_METADATA,
        "/authorize",
        "/token",
        "/register",
    }
)
REGISTRATION = ClientRegistrationOptions(enabled=True)
Handler = Callable[[Request], Awaitable[Response]]
NO_STORE = {"Cache-Control": "no-store"}


class SignInRefused(Exception):
    """An authorization request refused before its redirect URI was verified; `message` says
    what was wrong, for the page the dashboard shows instead of any redirect."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def site_of(scope: Scope, settings: Settings) -> Site:
    """This aat as the request reached it: its scheme, Host and root path.

    The Host header was checked against the allowed hosts before any route runs. The scheme
    is `AAT_DASHBOARD_URL`'s when that names the same host (a TLS proxy in front of aat)."""
    headers = Headers(scope=scope)
    server = scope.get("server") or ("127.0.0.1", 80)
    host = headers.get("host") or f"{server[0]}:{server[1]}"
    scheme = str(scope.get("scheme", "http"))
    configured = urlsplit(settings.dashboard_url)
    if configured.netloc.lower() == host.lower() and configured.scheme in ("http", "https"):
        scheme = configured.scheme
    return Site(base=f"{scheme}://{host}{scope.get('root_path') or ''}")


def resource_metadata_url(scope: Scope, settings: Settings) -> str:
    """Where `/mcp`'s protected-resource metadata is, for `WWW-Authenticate` (RFC 9728 §5.1)."""
    site = site_of(scope, settings)
    parts = urlsplit(site.resource)
    return f"{parts.scheme}://{parts.netloc}{RESOURCE_METADATA}{parts.path}"


class OAuthEndpoints:
    """The SDK's handlers, each built per request for the site the request reached."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.documents = ClientDocuments(allow_private=platform.settings.oauth_loopback_clients)

    def _site(self, request: Request) -> Site:
        return site_of(request.scope, self.platform.settings)

    def _provider(self, request: Request) -> SignInProvider:
        return SignInProvider(self.platform, site=self._site(request), documents=self.documents)

    async def protected_resource(self, request: Request) -> Response:
        """RFC 9728 metadata of `/mcp`, naming aat as its authorization server."""
        site = self._site(request)
        fields = {"resource": site.resource, "authorization_servers": [site.base]}
        metadata = ProtectedResourceMetadata.model_validate({**fields, "resource_name": "aat"})
        return await ProtectedResourceMetadataHandler(metadata).handle(request)

    async def authorization_server(self, request: Request) -> Response:
        """RFC 8414 metadata."""
        return await MetadataHandler(server_metadata(self._site(request))).handle(request)

    async def authorize(self, request: Request) -> Response:
        """Check the request and send the browser to the dashboard's page for it; any
        refusal is `SignInRefused` (a page), never a redirect to the client."""
        params = request.query_params if request.method == "GET" else await request.form()
        try:
            asked = AuthorizationRequest.model_validate(params)
        except ValidationError as exc:
            raise SignInRefused(
                f"the sign-in request is malformed: {stringify_pydantic_error(exc)}"
            ) from None
        provider = self._provider(request)
        try:
            client = await provider.find_client(asked.client_id)
        except UnknownClient as exc:
            raise SignInRefused(_unknown_client(asked.client_id, str(exc))) from None
        try:
            redirect_uri = _verified_redirect(client, asked)
            scopes = client.validate_scope(asked.scope)
            target = await provider.authorize(
                client,
                AuthorizationParams(
                    state=asked.state,
                    scopes=scopes,
                    code_challenge=asked.code_challenge,
                    redirect_uri=redirect_uri,
                    redirect_uri_provided_explicitly=asked.redirect_uri is not None,
                    resource=asked.resource,
                ),
            )
        except (InvalidRedirectUriError, InvalidScopeError) as exc:
            raise SignInRefused(exc.message) from None
        except AuthorizeError as exc:
            raise SignInRefused(f"{exc.error}: {exc.error_description}") from None
        return RedirectResponse(target, status_code=302, headers=NO_STORE)

    async def token(self, request: Request) -> Response:
        """Codes and refresh tokens for tokens, for this server's `/mcp` only."""
        site = self._site(request)
        resource = (await request.form()).get("resource")
        if isinstance(resource, str) and not same_resource(resource, site.resource):
            return _invalid_target(site)
        provider = self._provider(request)
        answered: Response = await TokenHandler(provider, ClientAuthenticator(provider)).handle(
            request
        )
        return answered

    async def register(self, request: Request) -> Response:
        """Dynamic client registration (RFC 7591)."""
        return await RegistrationHandler(self._provider(request), options=REGISTRATION).handle(
            request
        )


def oauth_routes(platform: Platform) -> list[Route]:
    """The metadata, `/authorize`, `/token` and `/register` routes, for the dashboard app."""
    endpoints = OAuthEndpoints(platform)
    reads = ["GET", "OPTIONS"]
    described = cors_middleware(endpoints.protected_resource, reads)
    return [
        Route(RESOURCE_METADATA, described, methods=reads),
        Route(RESOURCE_METADATA + "/mcp", described, methods=reads),
        Route(
            SERVER_METADATA, cors_middleware(endpoints.authorization_server, reads), methods=reads
        ),
        # No CORS for /authorize: a browser is sent there, no page fetches it.
        Route("/authorize", _limited(endpoints.authorize, cors=False), methods=["GET", "POST"]),
        Route("/token", _limited(endpoints.token), methods=["POST", "OPTIONS"]),
        Route("/register", _limited(endpoints.register), methods=["POST", "OPTIONS"]),
    ]


def server_metadata(site: Site) -> OAuthMetadata:
    """RFC 8414 metadata: code flow with PKCE S256, client id documents and registration."""
    built = build_metadata(
        site.base,  # type: ignore[arg-type]  # pydantic validates the string
        None,
        REGISTRATION,
        RevocationOptions(enabled=False),
    )
    fields = built.model_dump(mode="json", exclude_none=True)
    fields.update(
        issuer=site.base,
        token_endpoint_auth_methods_supported=["none", "client_secret_post", "client_secret_basic"],
        client_id_metadata_document_supported=True,
        authorization_response_iss_parameter_supported=True,
    )
    return OAuthMetadata.model_validate(fields)


def _limited(handler: Handler, *, cors: bool = True) -> ASGIApp:
    """The handler with the SDK's body limit, and (for clients' endpoints) its CORS."""
    app: ASGIApp = RequestBodyLimitMiddleware(
        request_response(handler), DEFAULT_MAX_REQUEST_BODY_SIZE
    )
    if not cors:
        return app
    return CORSMiddleware(
        app=app,
        allow_origins="*",
        allow_methods=["POST", "OPTIONS"],
        allow_headers=[MCP_PROTOCOL_VERSION_HEADER],
    )


def _unknown_client(client_id: str, why: str) -> str:
    """The page's line for a client aat cannot use: a document's host and what went wrong."""
    if is_document_url(client_id):
        host = urlsplit(client_id).hostname
        return f"the client's metadata document at {host} cannot be used: {why}"
    return why


def _verified_redirect(client: OAuthClientInformationFull, asked: AuthorizationRequest) -> AnyUrl:
    """The redirect URI the client registered that the request names (the SDK's check),
    refused also when it breaks the rules every registration follows now (a client stored
    before them)."""
    redirect_uri = client.validate_redirect_uri(asked.redirect_uri)
    if (problem := redirect_uri_problem(redirect_uri)) is not None:
        raise InvalidRedirectUriError(problem)
    return redirect_uri


def _invalid_target(site: Site) -> Response:
    return JSONResponse(
        {
            "error": "invalid_target",
            "error_description": f"this server issues tokens only for {site.resource}",
        },
        status_code=400,
        headers={"Cache-Control": "no-store"},
    )
