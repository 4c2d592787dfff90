"""Waiting without blocking the event loop: runs and polls in worker threads, progress meanwhile.

A queued irreversible call waits for the operator for up to `AAT_APPROVAL_WAIT_S`, sending MCP
progress notifications every few seconds so a client that resets its timeout on progress keeps
the call open. Stopping a wait (timeout, client gone) never stops the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import anyio
import anyio.to_thread

from webplatform.jobs.answers import Answer
from webplatform.jobs.tracking import job_answer, job_state
from webplatform.platform import Platform
from webplatform.process import server_pool
from webplatform.store import notify
from webplatform.store.models import UNFINISHED_STATES

PROGRESS_EVERY_S = 3.0
# A state read is a sub-millisecond indexed lookup; polling often keeps approvals snappy.
POLL_S = 0.05

T = TypeVar("T")
# (elapsed_s, total_s or None, message): sends one progress notification (a no-op when the
# client asked for none).
Progress = Callable[[float, float | None, str], Awaitable[None]]
# (progress, total, message) an upstream MCP server reported for the call, passed on.
Relay = Callable[[float, float | None, str | None], Awaitable[None]]


async def in_thread(
    fn: Callable[[], T], *, progress: Progress, what: str, relay: Relay | None = None
) -> T:
    """Run blocking `fn` in a worker thread, reporting progress every few seconds meanwhile.

    With `relay`, progress an upstream MCP server reports for a call `fn` makes is passed to
    it (`server_pool.relaying`), in the order it came. If the caller is cancelled the thread
    is still awaited to the end, so a run that started is finished and recorded.
    """
    result: list[T] = []
    start = time.monotonic()
    loop = asyncio.get_running_loop()
    relayed: asyncio.Queue[tuple[float, float | None, str | None] | None] = asyncio.Queue()
    forwarded = anyio.Event()

    def upstream(value: float, total: float | None, message: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(relayed.put_nowait, (value, total, message))

    def run() -> T:
        with server_pool.relaying(upstream):
            return fn()

    async def tick() -> None:
        while True:
            await anyio.sleep(PROGRESS_EVERY_S)
            elapsed = time.monotonic() - start
            await progress(elapsed, None, f"{what} ({elapsed:.0f} s)")

    async def forward() -> None:
        assert relay is not None
        while (item := await relayed.get()) is not None:
            await relay(*item)
        forwarded.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        if relay is not None:
            tg.start_soon(forward)
        result.append(await anyio.to_thread.run_sync(run if relay is not None else fn))
        if relay is not None:  # what came before the answer is sent before it
            relayed.put_nowait(None)
            await forwarded.wait()
        tg.cancel_scope.cancel()
    return result[0]


async def wait_for_job(
    *,
    platform: Platform,
    job_id: int,
    timeout_s: float,
    progress: Progress,
    until_change: bool = False,
) -> Answer:
    """Wait up to `timeout_s` for the job to finish (or, with `until_change`, to change state).

    Reads the job's state in worker threads when a job moves in this process (the embedded
    worker of `aat serve` finishing it, an approval) and at least every POLL_S (a move in
    another process); sends progress every few seconds while it waits.
    """
    start = time.monotonic()
    with _moves() as moved:
        initial = await anyio.to_thread.run_sync(
            lambda: job_state(platform=platform, job_id=job_id)
        )
        last_progress = start
        state = initial
        while state is not None and state in UNFINISHED_STATES:
            if until_change and state != initial:
                break
            now = time.monotonic()
            elapsed = now - start
            if elapsed >= timeout_s:
                break
            if now - last_progress >= PROGRESS_EVERY_S:
                last_progress = now
                await progress(
                    elapsed,
                    timeout_s,
                    f"job {job_id} is {state.value}; waited {elapsed:.0f} s of {timeout_s:.0f} s",
                )
            await moved(min(POLL_S, max(0.0, timeout_s - elapsed)))
            state = await anyio.to_thread.run_sync(
                lambda: job_state(platform=platform, job_id=job_id)
            )
    return await anyio.to_thread.run_sync(lambda: job_answer(platform=platform, job_id=job_id))


@contextlib.contextmanager
def _moves() -> Iterator[Callable[[float], Awaitable[None]]]:
    """A wait that ends when a job moves in this process, or after its timeout.

    Registered before the waiter's first read, so a move between two reads ends the next
    wait at once instead of being missed. Without it a job finished by this process's worker
    was seen only at the next poll: 25 ms late on average.
    """
    loop = asyncio.get_running_loop()  # the SDK and aat's servers run on asyncio
    flag = asyncio.Event()

    def moved() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(flag.set)

    async def wait(timeout_s: float) -> None:
        with anyio.move_on_after(timeout_s):
            await flag.wait()
        flag.clear()

    stop = notify.on_move(moved)
    try:
        yield wait
    finally:
        stop()
