"""uvicorn's server with a loop that sleeps while nothing happens.

uvicorn wakes every 0.1 s to refresh its `Date` header (once a second) and to see whether it
was told to stop. Here the header is made when a request reads it (at most once a second), and
the loop sleeps until a signal to stop wakes it, so an idle `aat serve` has no timer in its
event loop. Where uvicorn's tick has other work (`limit_max_requests`, `callback_notify`,
neither set by aat) it ticks once a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from email.utils import formatdate

import uvicorn
from uvicorn.server import ServerState

TICK_S = 1.0
# uvicorn's own tick is a tenth of a second and it refreshes the header every tenth tick:
# counting ten per tick refreshes it on each of ours.
_TICKS_PER_S = 10


class DatedState(ServerState):
    """uvicorn's state shared by its connections, whose `default_headers` carry the `Date`
    of the second in which they are read."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._config = config
        self._second = -1
        self._headers: list[tuple[bytes, bytes]] = []
        super().__init__()

    @property
    def default_headers(self) -> list[tuple[bytes, bytes]]:
        """The headers every response starts with (`Date`, then the configured ones)."""
        second = int(time.time())
        if second != self._second:
            date = formatdate(second, usegmt=True).encode()
            headers = [(b"date", date)] if self._config.date_header else []
            self._headers, self._second = headers + self._config.encoded_headers, second
        return self._headers

    @default_headers.setter
    def default_headers(self, _value: list[tuple[bytes, bytes]]) -> None:
        """Ignored: uvicorn's tick sets them, and here they are made when read."""


class Server(uvicorn.Server):
    """`uvicorn.Server`, asleep while idle and woken at once when told to stop (a signal, or
    `should_exit` set from any thread)."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        super().__init__(config)
        self.server_state = DatedState(config)

    @property
    def should_exit(self) -> bool:
        """Whether the server is to stop; setting it wakes the sleeping loop."""
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed already
                self._loop.call_soon_threadsafe(self._wake.set)

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        # Only these need uvicorn's tick; without them nothing is done until told to stop.
        tick = self.config.limit_max_requests is not None or self.config.callback_notify
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), TICK_S if tick else None)
            counter = (counter + _TICKS_PER_S) % 864000
            should_exit = await self.on_tick(counter)
