"""The dashboard's front door: Host allow-list, body limit, same-origin POSTs, sessions, CSRF,
and the headers that keep pages out of frames and inline script out of pages.

It is one ASGI middleware in front of every route, so a new route is protected by default;
only the paths in `PUBLIC_PATHS` (and `/static`) are reachable without an operator session.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, quote, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dashboard import auth
from dashboard.urls import route_path, under_root
from webplatform.mcp.transports.oauth import OAUTH_PATHS

MAX_BODY_BYTES = 256 * 1024
MCP_MAX_BODY_BYTES = 4 * 1024 * 1024
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# /metrics answers a scraper itself: 401 without an admin session or the metrics token.
PUBLIC_PATHS = frozenset(
    {"/healthz", "/readyz", "/login", "/setup", "/favicon.ico", "/favicon.svg", "/metrics"}
)
WELL_KNOWN = "/.well-known/"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-frame-options", "DENY"),
    # `same-origin`, not `no-referrer`: with no-referrer a browser sends `Origin: null` on
    # form posts, and the same-origin check below would refuse the operator's own clicks.
    ("referrer-policy", "same-origin"),
    ("x-content-type-options", "nosniff"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    ("permissions-policy", "camera=(), microphone=(), geolocation=()"),
)


def csrf_token_for(session_token: str) -> str:
    """The CSRF token of a session: one per session, so every open tab shares it."""
    return hmac.new(session_token.encode(), b"aat-csrf", hashlib.sha256).hexdigest()


def allowed_hosts(extra: Iterable[str], port: int | None) -> frozenset[str]:
    """The Host header values the dashboard answers to on `port`."""
    hosts: set[str] = set()
    for name in LOOPBACK_NAMES:
        hosts.add(f"{name}:{port}" if port else name)
        if port in (80, None):
            hosts.add(name)
    hosts.update(h.lower() for h in extra)
    return frozenset(hosts)


@dataclass(frozen=True)
class GuardConfig:
    """What the guard needs to know; built once by `create_app`."""

    extra_hosts: tuple[str, ...]
    # Session cookie token -> operator name, or None (runs in a worker thread: it reads the DB).
    find_operator: Callable[[str], str | None]


class Guard:
    """ASGI middleware applying every check above, in order, before any route runs."""

    def __init__(self, app: ASGIApp, *, config: GuardConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request with a plain answer, or pass it on with its operator attached."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Paths inside the app: a root path (`aat serve --root-path`) is not part of them.
        path = route_path(scope)
        send = _with_security_headers(send, path=path)
        headers = Headers(scope=scope)
        is_mcp = path == "/mcp" or path.startswith("/mcp/")
        limit = MCP_MAX_BODY_BYTES if is_mcp else MAX_BODY_BYTES
        refusal = self._refusal(scope, headers, is_mcp=is_mcp, limit=limit)
        if refusal is not None:
            await _refuse(scope, receive, send, *refusal)
            return
        if is_mcp or path in OAUTH_PATHS or path.startswith(WELL_KNOWN):
            # /mcp checks Origin and its bearer token itself, and the OAuth endpoints are for
            # clients that sign in (SPEC §18); operator sessions are for pages. Any other
            # well-known path is not served: 404 from the router, not the login page.
            await self.app(scope, receive, send)
            return
        unsafe = scope["method"] not in SAFE_METHODS
        public = path in PUBLIC_PATHS or path.startswith("/static/")
        token = _cookie(headers, auth.SESSION_COOKIE)
        operator = await run_in_threadpool(self.config.find_operator, token) if token else None
        state = scope.setdefault("state", {})
        state["operator"] = operator
        state["csrf_token"] = csrf_token_for(token) if (token and operator) else ""
        if operator is None and not public:
            await _login_required(scope, receive, send, unsafe=unsafe)
            return
        if unsafe:
            csrf = csrf_token_for(token) if (token and operator and not public) else None
            checked = await _checked_body(receive, headers, limit=limit, csrf=csrf)
            if isinstance(checked, tuple):
                await _refuse(scope, _empty_receive, send, *checked)
                return
            receive = checked
        await self.app(scope, receive, send)

    def _refusal(
        self, scope: Scope, headers: Headers, *, is_mcp: bool, limit: int
    ) -> tuple[int, str] | None:
        """Why the request is refused before anyone's session is looked at (an unknown
        Host, a body declared too long, a cross-origin form to a page), or None."""
        if not self._host_ok(scope, headers):
            return 400, (
                "unknown Host header; open the dashboard "
                "at the address `aat serve` printed, or add it to AAT_ALLOWED_HOSTS"
            )
        if _declared_length(headers) > limit:
            return 413, f"request body over {limit} bytes"
        unsafe = scope["method"] not in SAFE_METHODS
        if not is_mcp and unsafe and not _same_origin(headers, scope):
            return 403, (
                "cross-origin request refused: submit the form from the dashboard's own pages"
            )
        return None

    def _host_ok(self, scope: Scope, headers: Headers) -> bool:
        host = headers.get("host", "").lower()
        server = scope.get("server")
        port = server[1] if server else None
        return host in allowed_hosts(self.config.extra_hosts, port)


def _with_security_headers(send: Send, *, path: str) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in SECURITY_HEADERS:
                if name not in headers:
                    headers[name] = value
            if not path.startswith("/static/") and "cache-control" not in headers:
                headers["cache-control"] = "no-store"
        await send(message)

    return wrapped


def _same_origin(headers: Headers, scope: Scope) -> bool:
    """True unless the browser says the request came from another site or origin."""
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None:
        # Browsers send Origin on every POST; without it only Sec-Fetch-Site can vouch, and
        # the CSRF token (checked next) still has to match.
        return True
    parts = urlsplit(origin)
    scheme = scope.get("scheme", "http")
    return parts.scheme == scheme and parts.netloc.lower() == headers.get("host", "").lower()


def _declared_length(headers: Headers) -> int:
    try:
        return int(headers.get("content-length", "0"))
    except ValueError:
        return 0


def _cookie(headers: Headers, name: str) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is just "no session"
        return None
    morsel = jar.get(name)
    return morsel.value if morsel and morsel.value else None


def _csrf_ok(headers: Headers, body: bytes, expected: str) -> bool:
    sent = headers.get(CSRF_HEADER)
    if sent is None and headers.get("content-type", "").startswith(
        "application/x-www-form-urlencoded"
    ):
        values = parse_qs(body.decode("utf-8", "replace")).get(CSRF_FIELD, [])
        sent = values[0] if values else None
    return sent is not None and hmac.compare_digest(sent, expected)


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _checked_body(
    receive: Receive, headers: Headers, *, limit: int, csrf: str | None
) -> Receive | tuple[int, str]:
    """The request body read (at most `limit` bytes) and checked for the CSRF token `csrf`
    (None: no session to protect), as a receive that replays it; or why it is refused."""
    body = await _read_body(receive, limit)
    if body is None:
        return 413, f"request body over {limit} bytes"
    if csrf is not None and not _csrf_ok(headers, body, csrf):
        return 403, (
            "form expired or forged (CSRF token mismatch): reload the page and submit again"
        )
    return _replay(body)


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


async def _empty_receive() -> Message:
    return {"type": "http.disconnect"}


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, text: str) -> None:
    response = PlainTextResponse(text + "\n", status_code=status)
    await response(scope, receive, send)


async def _login_required(scope: Scope, receive: Receive, send: Send, *, unsafe: bool) -> None:
    headers = Headers(scope=scope)
    # `next` stays inside the app; the login page puts the root path in front when it redirects.
    target = route_path(scope) + (
        ("?" + scope["query_string"].decode()) if scope["query_string"] else ""
    )
    login = under_root(scope, "/login?next=" + quote(target, safe=""))
    response: Response
    if unsafe:
        response = PlainTextResponse(
            "log in first: this action needs an operator session\n", status_code=403
        )
    elif headers.get("hx-request") == "true":
        # htmx would swap a login page into a fragment; tell it to navigate instead.
        response = PlainTextResponse(
            "log in first\n", status_code=401, headers={"HX-Redirect": login}
        )
    else:
        response = RedirectResponse(login, status_code=303)
    await response(scope, receive, send)
