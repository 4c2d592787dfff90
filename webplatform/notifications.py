"""Telling operators that an approval waits: the Apprise URLs in `AAT_NOTIFY`.

A notice names the tool, action and requester, carries the agent's reason when there is one
(on one line, clipped: the job page shows it whole) and the job page's link (which opens the
page, never decides). Arguments never go out: they may hold what the operator would not want
on a phone's lock screen. Sending happens on one background thread per process, fed by a
bounded queue, so a slow or dead notifier delays nothing but its own messages.

Apprise is imported only when `AAT_NOTIFY` names a URL: loading it and its plugins costs a
process start a few hundred milliseconds, for nothing when notifications are off.
"""

from __future__ import annotations

import logging
import queue
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from webplatform.config import Settings
from webplatform.store.models import Job

log = logging.getLogger(__name__)

FIELD_MAX_CHARS = 200
REASON_MAX_CHARS = 300
QUEUE_MAX = 1000


@dataclass(frozen=True)
class Notice:
    """One message for every AAT_NOTIFY URL."""

    title: str
    body: str


def check_urls(urls: Sequence[str]) -> None:
    """Raise ValueError (one line, naming the entry) for the first URL Apprise cannot use."""
    for number, url in enumerate(urls, start=1):
        if _quietly_instantiate(url) is None:
            scheme = url.split("://", 1)[0] if "://" in url else url[:12]
            raise ValueError(
                f"AAT_NOTIFY entry {number} ({scheme}://…) is not a valid Apprise URL; "
                "write it like ntfy://TOPIC, slack://TOKENS or json://HOST:PORT/PATH "
                "(https://github.com/caronc/apprise/wiki)"
            )


def _quietly_instantiate(url: str) -> object | None:
    import apprise

    # Apprise logs the rejected URL whole (tokens and passwords too); our one line names it.
    quiet = logging.getLogger("apprise")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL + 1)
    try:
        return apprise.Apprise.instantiate(url)
    finally:
        quiet.setLevel(level)


def new_pending_notice(*, job: Job, settings: Settings) -> Notice:
    """The first message about a pending approval."""
    title = f"Approval needed: {_describe(job)}"
    return Notice(title=title, body=_body(job, settings=settings, now=None))


def reminder_notice(*, job: Job, settings: Settings, now: datetime) -> Notice:
    """The reminder sent when a fifth of the approval window is left."""
    title = f"Reminder, approval still needed: {_describe(job)}"
    return Notice(title=title, body=_body(job, settings=settings, now=now))


def _describe(job: Job) -> str:
    requester = job.requested_by or job.client or str(job.surface)
    return f"{clean(job.name)} {clean(job.action)} for {clean(requester)}"


def _body(job: Job, *, settings: Settings, now: datetime | None) -> str:
    lines = []
    if job.agent_reason:
        lines.append(f"Reason: {clean(job.agent_reason, limit=REASON_MAX_CHARS)}")
    if now is not None and job.expires_at is not None:
        minutes = max(0, int((job.expires_at - now).total_seconds() // 60))
        lines.append(f"The request expires in {minutes} min unless someone decides.")
    lines.append(f"Open: {settings.job_page_url(job.id or 0)}")
    return "\n".join(lines)


def clean(text: str, *, limit: int = FIELD_MAX_CHARS) -> str:
    """`text` on one line without control or invisible format characters, clipped."""
    kept = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text
    )
    flat = " ".join(kept.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class Sender:
    """Sends notices to the given Apprise URLs from its own thread, in order."""

    def __init__(self, urls: Sequence[str]) -> None:
        import apprise

        check_urls(urls)
        self._apprise = apprise.Apprise()
        for url in urls:
            self._apprise.add(url)
        self._queue: queue.Queue[Notice] = queue.Queue(maxsize=QUEUE_MAX)
        self._thread = threading.Thread(target=self._run, name="aat-notify", daemon=True)
        self._thread.start()

    def post(self, notice: Notice) -> None:
        """Queue `notice` for sending; never waits (a full queue drops it, with a warning)."""
        try:
            self._queue.put_nowait(notice)
        except queue.Full:
            log.warning("notifications: queue full, dropped %r", notice.title)

    def _run(self) -> None:
        while True:
            notice = self._queue.get()
            try:
                sent = self._apprise.notify(title=notice.title, body=notice.body)
            except Exception:
                log.exception("notifications: sending %r failed", notice.title)
                continue
            if not sent:
                log.warning(
                    "notifications: %r did not reach every AAT_NOTIFY URL (see above)",
                    notice.title,
                )


_senders: dict[tuple[str, ...], Sender] = {}
_senders_lock = threading.Lock()


def sender_for(urls: Sequence[str]) -> Sender:
    """The one Sender of this process for these URLs (the dashboard and its embedded worker
    share it)."""
    key = tuple(urls)
    with _senders_lock:
        if key not in _senders:
            _senders[key] = Sender(urls)
        return _senders[key]
