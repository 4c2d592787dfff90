"""Clients named by a Client ID Metadata Document URL (the MCP authorization spec's way for a
client to say who it is without registering): fetched over https, checked, kept a few minutes.

The document is fetched with the system's CA store (`SSL_CERT_FILE` honoured). A client id
whose host resolves to a loopback, private or link-local address is refused unless
`AAT_OAUTH_LOOPBACK_CLIENTS=1`: otherwise any page could make aat fetch from the machine's
own network. The host is resolved once, and the connection goes to the address that was
checked: a name that answers with a public address for the check and a loopback one for the
connection (DNS rebinding) reaches nothing. For the same reason the fetch goes direct, never
through `HTTPS_PROXY`. Redirects are not followed, and a document over 64 KiB is refused.

Every client's redirect URIs, registered or in a document, are `https`, or `http` on a
loopback address (`redirect_uri_problem`): the browser carries the code there, and aat
never sends it to `javascript:`, `data:`, `file:` or a plain-http host on the network.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
import httpcore
import httpx
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import AnyUrl, ValidationError

MAX_DOCUMENT_BYTES = 64 * 1024
FETCH_TIMEOUT_S = 5.0
CACHE_S = 300.0


class ClientDocumentError(ValueError):
    """A client id URL whose document cannot be used; the message says why."""


class DocumentClient(OAuthClientInformationFull):
    """A client described by its metadata document. Its loopback redirect URIs match on any
    port (RFC 8252 §7.3: a native client listens on whatever port is free, so its document
    names `http://localhost/callback` or `http://127.0.0.1/callback`); all else exactly."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        """The registered URI that `redirect_uri` names (see the class docstring)."""
        if redirect_uri is not None and any(
            _same_loopback_uri(redirect_uri, listed) for listed in self.redirect_uris or []
        ):
            return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


def _same_loopback_uri(given: AnyUrl, listed: AnyUrl) -> bool:
    """Both `http` on the same loopback host with the same path and query, ports aside."""
    loopback = ("localhost", "127.0.0.1", "[::1]", "::1")
    return (
        given.scheme == listed.scheme == "http"
        and given.host in loopback
        and given.host == listed.host
        and given.path == listed.path
        and given.query == listed.query
    )


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")


def is_loopback_host(host: str | None) -> bool:
    """True for `localhost` and loopback addresses (any of 127.0.0.0/8, `::1`)."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: object) -> str | None:
    """Why `uri` cannot be a client's redirect URI (one line), or None when it can: `https`
    with a host, or `http` on a loopback address (any port); no fragment (RFC 6749 §3.1.2)."""
    parts = urlsplit(str(uri))
    scheme = parts.scheme.lower()
    allowed = (scheme == "https" and bool(parts.hostname)) or (
        scheme == "http" and is_loopback_host(parts.hostname)
    )
    if allowed:
        problem = None
    elif scheme == "http":
        problem = f"http is allowed only on a loopback address (host {parts.hostname!r})"
    else:
        problem = f"scheme {scheme or 'none'!r} is not https or loopback http"
    if problem is None and parts.fragment:
        problem = "it has a fragment"
    return None if problem is None else f"redirect URI {str(uri)[:200]!r} refused: {problem}"


def is_document_url(client_id: str) -> bool:
    """True for a client id that names a metadata document (an https URL with a path)."""
    parts = urlsplit(client_id)
    return parts.scheme == "https" and parts.path not in ("", "/")


@dataclass
class ClientDocuments:
    """Fetched client documents, each kept `CACHE_S` seconds; one per app."""

    allow_private: bool = False
    _cache: dict[str, tuple[float, OAuthClientInformationFull]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def get(self, client_id: str) -> OAuthClientInformationFull:
        """The client the document at `client_id` describes; ClientDocumentError if none."""
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(client_id)
        if cached is not None and now - cached[0] < CACHE_S:
            return cached[1]
        client = await fetch_document(client_id, allow_private=self.allow_private)
        with self._lock:
            self._cache[client_id] = (now, client)
        return client


async def fetch_document(client_id: str, *, allow_private: bool) -> OAuthClientInformationFull:
    """Fetch and check the metadata document at `client_id` (see the module docstring)."""
    parts = urlsplit(client_id)
    if not is_document_url(client_id) or parts.fragment or not parts.hostname:
        raise ClientDocumentError(f"client id {client_id!r} is not an https URL with a path")
    try:
        async with httpx.AsyncClient(
            transport=_CheckedTransport(allow_private=allow_private),
            follow_redirects=False,
            timeout=FETCH_TIMEOUT_S,
            trust_env=False,
        ) as http:
            response = await http.get(client_id, headers={"Accept": "application/json"})
    except _RefusedAddress as exc:
        raise ClientDocumentError(str(exc)) from None
    except httpx.HTTPError as exc:
        raise ClientDocumentError(f"cannot fetch the client document {client_id}: {exc}") from None
    if response.status_code != 200:
        raise ClientDocumentError(f"client document {client_id} answered {response.status_code}")
    if len(response.content) > MAX_DOCUMENT_BYTES:
        raise ClientDocumentError(f"client document {client_id} is over {MAX_DOCUMENT_BYTES} bytes")
    return _client_from(client_id, response.content)


class _RefusedAddress(Exception):
    """The client document's host resolved to an address aat will not fetch from."""


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    """Resolves each host once, checks the address, and connects to that very address.

    TLS still checks the certificate against the URL's host name (httpcore passes the
    origin's name to the handshake, not the address it connected to)."""

    def __init__(self, *, allow_private: bool) -> None:
        self._allow_private = allow_private
        self._backend = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """A connection to the one address `host` was checked to have."""
        address = await anyio.to_thread.run_sync(_checked_address, host, port, self._allow_private)
        return await self._backend.connect_tcp(
            address,
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def sleep(self, seconds: float) -> None:
        """Sleep as the wrapped backend does (httpcore's retries use it)."""
        await self._backend.sleep(seconds)


class _CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport over a pool that connects through `_CheckedBackend`, trusting
    the system's CA store (`SSL_CERT_FILE` honoured)."""

    def __init__(self, *, allow_private: bool) -> None:
        context = ssl.create_default_context()
        super().__init__(verify=context, trust_env=False)
        # httpx takes no network backend of its own; its pool is replaced by an equal one
        # that has it (httpx keeps the pool in `_pool` since 0.18).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context, network_backend=_CheckedBackend(allow_private=allow_private)
        )


def _client_from(client_id: str, content: bytes) -> OAuthClientInformationFull:
    try:
        document = json.loads(content)
    except ValueError:
        raise ClientDocumentError(f"client document {client_id} is not JSON") from None
    if not isinstance(document, dict) or document.get("client_id") != client_id:
        raise ClientDocumentError(f"client document {client_id} does not name itself as client_id")
    if document.get("token_endpoint_auth_method", "none") != "none":
        raise ClientDocumentError(
            f"client document {client_id}: only token_endpoint_auth_method 'none' is supported"
        )
    redirect_uris = document.get("redirect_uris")
    if not redirect_uris or not isinstance(redirect_uris, list):
        raise ClientDocumentError(f"client document {client_id} lists no redirect_uris")
    for uri in redirect_uris:
        if (problem := redirect_uri_problem(uri)) is not None:
            raise ClientDocumentError(f"client document {client_id}: {problem}")
    # A document holds no secret: whatever it says, the client authenticates with none.
    document = {k: v for k, v in document.items() if not k.startswith("client_secret")}
    document["token_endpoint_auth_method"] = "none"
    try:
        return DocumentClient.model_validate(document)
    except ValidationError as exc:
        raise ClientDocumentError(f"client document {client_id} is invalid: {exc}") from None


def _checked_address(host: str, port: int, allow_private: bool) -> str:
    """The address to connect to for `host`: its first, after checking every one it has."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise _RefusedAddress(f"cannot resolve {host}: {exc}") from None
    addresses = [str(info[4][0]) for info in infos]
    for address in addresses:
        if not allow_private and not ipaddress.ip_address(address).is_global:
            raise _RefusedAddress(
                f"client document host {host} is a loopback or private address ({address}): "
                "set AAT_OAUTH_LOOPBACK_CLIENTS=1 to allow it"
            )
    if not addresses:
        raise _RefusedAddress(f"cannot resolve {host}: no address")
    return addresses[0]
