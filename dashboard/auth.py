"""Operator sign-in: argon2id passwords, sessions kept in the database, a login rate limit.

Sessions live in the `operator_session` table (only a hash of the cookie's token is
stored, and each row is signed by aat), so restarting `aat serve` logs nobody out, and a row
inserted by SQL logs nobody in. The cookie is HttpOnly and SameSite=Strict: another site can
neither read it nor make the browser send it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from starlette.responses import Response

from webplatform.platform import Platform
from webplatform.store import audit
from webplatform.trust.authority import report_forged

SESSION_COOKIE = "aat_session"
SESSION_TTL_S = 7 * 24 * 3600.0
# At most this many failed logins per window, per address and per user name (and as many
# wrong step-up passwords per session).
MAX_FAILURES = 5
FAILURE_WINDOW_S = 300.0


@dataclass
class LoginLimiter:
    """Counts login attempts per key in a sliding window; in memory, per dashboard process.

    Every attempt counts until it succeeds; a success forgets its keys' attempts.
    """

    max_failures: int = MAX_FAILURES
    window_s: float = FAILURE_WINDOW_S
    _failures: dict[str, deque[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attempt(self, *keys: str) -> float:
        """Count one login attempt against every key, before its password is checked.

        Returns 0 when the attempt may go on, else the seconds to wait (and counts nothing).
        Checking and counting happen under one lock, so a burst of concurrent guesses gets
        exactly `max_failures` checks, not one per guess that raced past a shared count.
        """
        now = time.monotonic()
        wait = 0.0
        with self._lock:
            for key in keys:
                times = self._failures.setdefault(key, deque())
                while times and now - times[0] > self.window_s:
                    times.popleft()
                if len(times) >= self.max_failures:
                    wait = max(wait, self.window_s - (now - times[0]))
            if wait == 0.0:
                for key in keys:
                    self._failures[key].append(now)
        return wait

    def succeeded(self, *keys: str) -> None:
        """Forget the attempts of these keys (the password was right)."""
        with self._lock:
            for key in keys:
                self._failures.pop(key, None)


def session_key(token: str) -> str:
    """The key a session's step-up passwords are counted on: a hash of its cookie token (the
    token itself is never kept), "" without one."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:32] if token else ""


def operator_for_token(platform: Platform, token: str) -> str | None:
    """The operator a session cookie belongs to, or None (unknown or expired, a session or
    operator row that does not verify; removing an operator deletes their sessions)."""
    # No touch: the approvals page polls every second and reads must not queue on writes.
    name = platform.sessions.operator_of(token)
    report_forged(platform)
    return name


def log_in(*, platform: Platform, username: str, password: str, address: str | None) -> str | None:
    """Check the password (against a signed operator row only); on success open a signed
    session and return its cookie token."""
    try:
        return platform.sessions.log_in(username, password, SESSION_TTL_S, address)
    finally:
        report_forged(platform)


def log_out(*, platform: Platform, token: str, operator: str, address: str | None) -> None:
    """End a session; the cookie stops working at once, everywhere."""
    platform.sessions.end(token, audit.AuditEntry(actor=operator, event="logout", address=address))


def start_browser_session(*, platform: Platform, operator: str) -> str:
    """Open a session for an operator who just proved who they are (first-run setup)."""
    return platform.sessions.start(operator, SESSION_TTL_S)


def set_session_cookie(response: Response, token: str, *, secure: bool) -> None:
    """Attach the session cookie: HttpOnly, SameSite=Strict, whole site."""
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(SESSION_TTL_S),
        httponly=True,
        samesite="strict",
        secure=secure,
        path="/",
    )


def clear_session_cookie(response: Response, *, secure: bool) -> None:
    """Tell the browser to forget the session cookie."""
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=secure
    )
