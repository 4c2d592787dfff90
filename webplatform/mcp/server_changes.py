"""An upstream MCP server's tool list changing (SPEC §22), told to this surface's clients.

When a server of this process says its tools changed, the pool lists them again
(`server_pool.ServerPool.on_change`); here the platform records what is new or changed
(held, not offered, audited, as on first sight) and clients that listen for tool list changes
on a `subscriptions/listen` stream (the 2026-07-28 era, whose listen aat serves) are told:
what `capabilities` offers moved. A handshake-era session is not told: aat's own tool list
does not change, and it does not advertise `listChanged` there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread
from mcp.server.subscriptions import SubscriptionBus, ToolsListChanged

from webplatform.platform import Platform
from webplatform.process import server_pool

logger = logging.getLogger(__name__)


@asynccontextmanager
async def told(platform: Platform, bus: SubscriptionBus) -> AsyncIterator[None]:
    """While entered, each upstream tool list change is recorded and published on `bus`."""
    loop = asyncio.get_running_loop()
    changes: asyncio.Queue[str] = asyncio.Queue()

    def changed(server: str) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(changes.put_nowait, server)

    async def tell() -> None:
        while True:
            server = await changes.get()
            try:
                # Reading the registry records what the server lists now (held when new).
                await anyio.to_thread.run_sync(platform.registry)
            except Exception:  # a database hiccup: the next reading records it
                logger.warning("could not record the tools %s listed", server, exc_info=True)
            await bus.publish(ToolsListChanged())

    stop = server_pool.POOL.on_change(changed)
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(tell)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()
    finally:
        stop()
