"""The read-only resource of this client's jobs waiting for approval, and its change hints.

Reading it is level-triggered: it shows the queue as it is now and changes nothing. While
anyone is subscribed, a watcher re-reads the queue every second and, when it changes (a job
decided, expired or added), tells subscribers: modern clients through `subscriptions/listen`,
legacy ones that sent `resources/subscribe` through `notifications/resources/updated`.
Notifications are hints: a client that misses one loses nothing, the next read shows the
truth. With nobody subscribed the queue is not read, and the watcher sleeps until someone
subscribes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent

from webplatform.jobs.tracking import pending_for, pending_of_client
from webplatform.mcp.naming import PENDING_APPROVALS_URI
from webplatform.platform import Platform
from webplatform.store.models import Surface

logger = logging.getLogger(__name__)

WATCH_EVERY_S = 1.0


def pending_body(
    *, platform: Platform, surface: Surface, client: str | None, agent: str | None = None
) -> str:
    """The resource's JSON text: jobs this client (or, with a token, this agent) asked for
    that wait for an operator."""
    jobs = pending_of_client(platform=platform, surface=surface, client=client, agent=agent)
    body: dict[str, Any] = {
        "client": client,
        "count": len(jobs),
        "jobs": jobs,
        "next": "an operator decides each in the dashboard; call job_status with a job id "
        "(and wait_s) for its outcome",
    }
    return json.dumps(body, ensure_ascii=False)


def _connection_key(session: ServerSession) -> int:
    # Each request gets its own session proxy; the initialize params are one object per
    # connection, so they identify it across subscribe and unsubscribe.
    params = session.client_params
    return id(params) if params is not None else id(session)


class _CountingBus(InMemorySubscriptionBus):
    """The SDK's in-memory bus, counting its listeners; `on_subscribe` runs for each new one."""

    def __init__(self, on_subscribe: Callable[[], None]) -> None:
        super().__init__()
        self.listeners = 0
        self._on_subscribe = on_subscribe

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe = super().subscribe(listener)
        self.listeners += 1
        self._on_subscribe()
        gone = False

        def counted() -> None:
            nonlocal gone
            if not gone:
                gone = True
                self.listeners -= 1
            unsubscribe()

        return counted


class ApprovalWatcher:
    """Tells subscribers when the approval queue of this surface changes."""

    def __init__(self, platform: Platform, surface: Surface) -> None:
        self.platform = platform
        self.surface = surface
        self.bus = _CountingBus(on_subscribe=self._someone_listens)
        # Legacy `resources/subscribe` sessions; a session that fails to send is dropped.
        self._legacy: dict[int, ServerSession] = {}
        # Set by the first subscriber while the watcher sleeps for want of one.
        self._listener_came: anyio.Event | None = None

    def _someone_listens(self) -> None:
        if self._listener_came is not None:
            self._listener_came.set()

    def subscribe_legacy(self, session: ServerSession) -> None:
        """Remember a handshake-era session that subscribed to the resource."""
        self._legacy[_connection_key(session)] = session
        self._someone_listens()

    def unsubscribe_legacy(self, session: ServerSession) -> None:
        """Forget a handshake-era subscriber."""
        self._legacy.pop(_connection_key(session), None)

    async def notify(self) -> None:
        """Send one update hint to every subscriber of the resource."""
        await self.bus.publish(ResourceUpdated(uri=PENDING_APPROVALS_URI))
        for key, session in list(self._legacy.items()):
            try:
                await session.send_resource_updated(PENDING_APPROVALS_URI)
            except Exception:  # a gone client must not stop the others' hints
                logger.debug("dropping a legacy subscriber that could not be notified")
                self._legacy.pop(key, None)

    def _waiting_ids(self) -> frozenset[int]:
        jobs = pending_for(platform=self.platform, surface=self.surface)
        return frozenset(int(j["job"]) for j in jobs)

    @property
    def wanted(self) -> bool:
        """Whether anyone listens for the hints (else the queue is not read at all)."""
        return bool(self.bus.listeners or self._legacy)

    async def watch(self) -> None:
        """Read the queue every second while anyone listens; notify on every change.

        Nobody listening, nothing is read: it sleeps until someone subscribes. The first read
        for a new listener sends a hint too: the queue went unread, so a change may have been
        missed (a spare hint costs the listener one read of the resource).
        """
        seen: frozenset[int] | None = None
        while True:
            if not self.wanted:
                seen = None
                self._listener_came = anyio.Event()
                await self._listener_came.wait()
                self._listener_came = None
                continue
            now: frozenset[int] | None
            try:
                now = await anyio.to_thread.run_sync(self._waiting_ids)
            except Exception:  # a database hiccup must not end the watcher
                logger.warning("could not read the approval queue", exc_info=True)
                now = seen
            if now is not None and now != seen:
                await self.notify()
            seen = now
            await anyio.sleep(WATCH_EVERY_S)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the watcher for as long as the context is entered."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.watch)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
