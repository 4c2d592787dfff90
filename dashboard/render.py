"""Pages and fragments from templates: a view renders a whole page, or one named block of
it when htmx asks (`HX-Request`), and says so with `Vary: HX-Request`.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from jinja2 import (
    BytecodeCache,
    Environment,
    FileSystemLoader,
    pass_context,
    select_autoescape,
)
from jinja2.bccache import Bucket
from jinja2.runtime import Context
from starlette.responses import HTMLResponse, JSONResponse

from dashboard import urls
from dashboard.assets import TEMPLATES_DIR
from dashboard.data import json_or_text
from webplatform.store.models import UNFINISHED_STATES
from webplatform.trust import permissions


def _ago(value: datetime | None, now: datetime | None = None) -> str:
    if value is None:
        return ""
    seconds = int(((now or datetime.now(UTC)) - value).total_seconds())
    return _span(seconds) + " ago" if seconds >= 0 else "in " + _span(-seconds)


def _span(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600}h"


def _until(value: datetime | None) -> str:
    if value is None:
        return ""
    seconds = int((value - datetime.now(UTC)).total_seconds())
    return "expired" if seconds <= 0 else _span(seconds)


def _iso(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


# Characters that change how text reads without being seen (SPEC §15, §19): every character
# of the categories Cc (controls: a terminal escape, a NUL), Cf (format: bidi controls, as in
# "\u202ekcatta@live.example", which reads as "elpmaxe.evil@attack"; zero-width characters,
# the soft hyphen, tag characters), Co (private use), Cn (unassigned) and Cs (lone
# surrogates), the line and paragraph separators, and the letters and marks that draw as
# nothing (Hangul fillers, the blank Braille pattern, variation selectors). Tab and line
# breaks stay as they are.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp"})
_BLANK = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)
_ASCII_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NON_ASCII = re.compile("[^\x00-\x7f]+")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _reveal_run(match: re.Match[str]) -> str:
    run = match.group()
    # Most non-ASCII text (accents, CJK, emoji) is printable and has no blank letter: kept
    # whole, checked at C speed; only a run with something suspect is looked at by character.
    if run.isprintable() and not _BLANK.search(run):
        return run
    return "".join(
        _escape(c) if unicodedata.category(c) in _HIDDEN_CATEGORIES or _BLANK.match(c) else c
        for c in run
    )


def reveal(text: Any) -> str:
    """`text` with every invisible, direction-changing or blank-looking character written as
    `\\uXXXX` (`\\UXXXXXXXX` beyond the BMP)."""
    value = "" if text is None else str(text)
    value = _ASCII_CONTROL.sub(lambda m: _escape(m.group()), value)
    return value if value.isascii() else _NON_ASCII.sub(_reveal_run, value)


def hides_characters(text: Any) -> bool:
    """True when `text` contains a character `reveal` would write out."""
    return text is not None and reveal(text) != str(text)


def self_reported(job: Any) -> bool:
    """True when nothing vouched for who asked for `job` (no agent token, no operator signed
    in): its requester's name is the client's own word (SPEC §19)."""
    return not getattr(job, "requester_proof", None)


class _CompiledTemplates(BytecodeCache):
    """Templates compiled once per process, for every environment it builds (an app each;
    the tests build hundreds). Jinja checks each entry against the template's source, so an
    edited template is compiled again."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        code = self._code.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


_COMPILED = _CompiledTemplates()


def build_environment() -> Environment:
    """The template environment: autoescape on for every template, strict about typos."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=_COMPILED,
    )
    env.filters["ago"] = _ago
    env.filters["until"] = _until
    env.filters["iso"] = _iso
    env.filters["pretty_json"] = _pretty_json
    env.filters["span"] = _span
    env.filters["fromjson"] = json_or_text
    env.globals["url_for"] = _url_for
    env.filters["reveal"] = reveal
    env.tests["hiding_characters"] = hides_characters
    env.tests["self_reported"] = self_reported
    env.globals["UNFINISHED_STATES"] = UNFINISHED_STATES
    return env


@pass_context
def _url_for(context: Context, name: str, /, **params: Any) -> str:
    """`url_for("job_page", job_id=3)` in a template: the route's path under the root path."""
    return urls.url_for(context["request"], name, **params)


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object, or {} when it sent none (a script's endpoints then say what
    was missing, one field at a time)."""
    try:
        body = await request.json()
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {}


@dataclass(frozen=True)
class Notice:
    """What just happened, said at the top of a page: `message` when it went through, or
    `error` when it was refused, with the `status` the response tells every client (htmx
    swaps a refusal in anyway)."""

    message: str | None = None
    error: str | None = None
    status: int = 200

    @classmethod
    def refused(cls, error: str, status: int) -> Notice:
        """A refusal: `error`, answered with `status`."""
        return cls(error=error, status=status)

    def shown(self) -> dict[str, str | None]:
        """The page's `message` and `error`, as its template reads them."""
        return {"message": self.message, "error": self.error}


# A page with nothing to tell.
QUIET = Notice()


def json_error(text: str, status_code: int = 400) -> JSONResponse:
    """A script's endpoint refusing, in the shape `static/passkeys.js` shows: `{error}`."""
    return JSONResponse({"error": text}, status_code=status_code)


def is_htmx(request: Request) -> bool:
    """True for an htmx request that wants a fragment (not a history restore)."""
    return (
        request.headers.get("hx-request") == "true"
        and request.headers.get("hx-history-restore-request") != "true"
    )


class Pages:
    """Renders templates with the context every page needs (operator, CSRF token, counts)."""

    def __init__(
        self,
        env: Environment,
        *,
        pending_count: Callable[[], int],
        role_of: Callable[[str], str | None] = lambda _name: None,
    ) -> None:
        self.env = env
        self.pending_count = pending_count
        self.role_of = role_of

    def actor_of(self, request: Request, operator: str | None) -> permissions.Decider:
        """The page's operator as `may` judges them: their role read once per request (no
        operator: nobody, who may do nothing)."""
        if not operator:
            return permissions.Decider(name="", role=None)
        if not hasattr(request.state, "role"):
            request.state.role = self.role_of(operator)
        return permissions.Decider(name=operator, role=request.state.role)

    def render(
        self,
        request: Request,
        template: str,
        context: dict[str, Any],
        *,
        block: str | None = None,
        status_code: int = 200,
        headers: dict[str, str] | None = None,
    ) -> HTMLResponse:
        """The page, or just `block` of it when htmx asked for a fragment."""
        full = {
            "request": request,
            "operator": getattr(request.state, "operator", None),
            "csrf_token": getattr(request.state, "csrf_token", ""),
            # Inside the app, without the root path: for marking the current page.
            "path": urls.route_path(request.scope),
            **context,
        }
        fragment = block is not None and is_htmx(request)
        if "can" not in full:
            # What the page offers this operator, as `may` answers it (the server refuses the
            # rest anyway): pages read these booleans and spell no role.
            actor = self.actor_of(request, full["operator"])
            full.setdefault("actor", actor)
            full["can"] = permissions.can(actor)
        if full["operator"] and "pending_count" not in full and not fragment:
            full["pending_count"] = self.pending_count()
        tmpl = self.env.get_template(template)
        if block is not None and fragment:
            ctx = tmpl.new_context(full)
            html = "".join(tmpl.blocks[block](ctx))
        else:
            html = tmpl.render(full)
        response = HTMLResponse(html, status_code=status_code, headers=headers)
        response.headers["vary"] = "HX-Request"
        return response
