"""First-run setup: with no operator yet, a one-time link printed to the terminal only.

The link carries a random token; only its sha256 is kept (in `Meta`), it works once, and it
stops working for good as soon as any operator exists: removing every operator later does not
bring it back (add one with `aat operator add` then). Nothing else can create the first
operator from the browser. "For good" is kept outside the database too (a marker in
`AAT_HOME`, `webplatform.trust.authority.OPERATORS_FILE`): a database writer who deletes every
operator and plants a setup token hash of their own still finds setup closed.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import sys
from typing import TextIO

from sqlmodel import Session

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import meta, operators
from webplatform.trust.authority import OPERATORS_FILE, remember, remembers

SETUP_TOKEN_KEY = "dashboard.setup_token_sha256"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def open_setup(platform: Platform) -> str | None:
    """A fresh setup token when no operator ever existed (replacing any older one), else None."""

    def renew(session: Session) -> str | None:
        if closed or operators.ever_had_operators(session=session):
            meta.delete_meta(session=session, key=SETUP_TOKEN_KEY)
            return None
        token = secrets.token_urlsafe(32)
        meta.set_meta(session=session, key=SETUP_TOKEN_KEY, value=_hash(token))
        return token

    closed = remembers(platform, OPERATORS_FILE)
    token = platform.operators.step(renew)
    if token is None:
        remember(platform, OPERATORS_FILE)
    return token


def setup_base_url(settings: Settings, host: str | None, port: int | None) -> str:
    """The address to print: the one being served, or `AAT_DASHBOARD_URL` for a wildcard
    address or behind a proxy (a root path: only the proxy's address has the prefix)."""
    if host is None or port is None or settings.root_path:
        return settings.dashboard_url.rstrip("/")
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return f"http://{host}:{port}"
    if address.is_unspecified:
        return settings.dashboard_url.rstrip("/")
    if address.is_loopback:
        # The same listener, by the one name passkeys accept (a WebAuthn relying party is a
        # domain, never an IP address), so the operator set up there can add one at once.
        return f"http://localhost:{port}"
    shown = f"[{address}]" if address.version == 6 else str(address)
    return f"http://{shown}:{port}"


def print_setup_link(
    settings: Settings,
    platform: Platform,
    *,
    host: str | None = None,
    port: int | None = None,
    out: TextIO | None = None,
) -> str | None:
    """On a first start with no operator, print the one-time setup link; return it.

    Returns None when an operator exists or ever existed (then, with none left, it says
    how to add one from the command line). The link is only
    ever written to the terminal of the process that serves the dashboard.
    """
    token = open_setup(platform)
    stream = out or sys.stdout
    if token is None:
        if platform.operators.count() == 0:
            stream.write(
                "\nNo dashboard operator exists: add one with "
                "`aat operator add NAME --password-stdin`\n\n"
            )
        return None
    link = f"{setup_base_url(settings, host, port)}/setup?token={token}"
    stream.write(
        "\nNo dashboard operator exists yet. Open this one-time link to create one:\n"
        f"\n    {link}\n\n"
        "(or run `aat operator add NAME --password-stdin`)\n\n"
    )
    stream.flush()
    return link


def setup_open(platform: Platform, token: str) -> bool:
    """True when `token` is the current setup token and no operator ever existed."""

    def stored_hash(session: Session) -> str | None:
        if operators.ever_had_operators(session=session):
            return None
        return meta.get_meta(session=session, key=SETUP_TOKEN_KEY)

    if remembers(platform, OPERATORS_FILE):
        return False
    stored = platform.operators.step(stored_hash, write=False)
    return stored is not None and hmac.compare_digest(stored, _hash(token))


def complete_setup(*, platform: Platform, token: str, username: str, password: str) -> str | None:
    """Create the first operator with the setup token; returns an error line, or None.

    Checks and uses up the token in the same transaction, so it works exactly once.
    """
    seal, roles = platform.seal(), platform.roles()
    if remembers(platform, OPERATORS_FILE):
        return "setup is already done: log in, or ask an operator to add you"

    def use_token(session: Session) -> str | None:
        stored = meta.get_meta(session=session, key=SETUP_TOKEN_KEY)
        if operators.ever_had_operators(session=session) or stored is None:
            return "setup is already done: log in, or ask an operator to add you"
        if not hmac.compare_digest(stored, _hash(token)):
            return "this setup link is not valid: use the latest link `aat serve` printed"
        try:
            operators.add_operator(
                session=session,
                name=username,
                password=password,
                seal=seal,
                roles=roles,
                actor="setup",
            )
        except operators.OperatorError as exc:
            return str(exc)
        meta.delete_meta(session=session, key=SETUP_TOKEN_KEY)
        return None

    error = platform.operators.step(use_token)
    if error is None:
        remember(platform, OPERATORS_FILE)
    return error
