"""Process supervision: pump a tool's pipes, enforce its timeout, kill its whole process group.

stdout and stderr are read concurrently and capped, so a chatty tool cannot exhaust memory;
when the tool exits or times out its process group is killed with SIGKILL, so nothing it
started outlives the run.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, Protocol, cast

# How long to keep draining pipes after the process group is dead. Only a process that escaped
# the group (its own setsid) can still hold them open, and we do not wait on it.
_DRAIN_GRACE_S = 0.5
_READ_CHUNK = 65536


class Process(Protocol):
    """What is supervised: a `subprocess.Popen`, or a process the spawner started."""

    @property
    def pid(self) -> int: ...
    @property
    def stdout(self) -> IO[bytes] | None: ...
    @property
    def stderr(self) -> IO[bytes] | None: ...
    @property
    def returncode(self) -> Any: ...
    def wait(self, timeout: float | None = None) -> int: ...


@dataclass
class Capture:
    stdout: bytearray
    stderr: bytearray
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False


@dataclass(frozen=True)
class Watch:
    """How a process is watched: its time `limit` (seconds), `on_tick()` every `tick_s`
    while it runs, and the `cap` in bytes kept of each of stdout and stderr."""

    limit: float
    on_tick: Callable[[], None] | None = None
    tick_s: float = 1.0
    cap: int = 1_000_000


def supervise(
    proc: Process,
    watch: Watch,
    *,
    exited: Callable[[], bool] | None = None,
    exit_fd: int | None = None,
) -> Capture:
    """Pump both pipes until the process group is gone, enforcing the timeout and ticking.

    `exited` says whether the process has exited (by default `waitid` on a child of ours);
    `exit_fd`, when given, becomes readable when that may have changed, so it is not polled.
    """
    limit, on_tick, tick_s, cap = watch.limit, watch.on_tick, watch.tick_s, watch.cap
    assert proc.stdout is not None and proc.stderr is not None
    has_exited = exited or (lambda: _has_exited(proc.pid))
    capture = Capture(bytearray(), bytearray())
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    if exit_fd is not None:
        sel.register(exit_fd, selectors.EVENT_READ, "exit")
    now = time.monotonic()
    deadline, next_tick = now + limit, now + tick_s
    drain_until: float | None = None
    try:
        while True:
            now = time.monotonic()
            if drain_until is None and has_exited():
                if exit_fd is not None:
                    sel.unregister(exit_fd)
                # Kill stragglers while the leader is an unreaped zombie: its pid (== the group
                # id) cannot be recycled yet, so killpg cannot hit an unrelated group.
                kill_group(proc.pid)
                drain_until = now + _DRAIN_GRACE_S
            elif drain_until is None and now >= deadline:
                kill_group(proc.pid)
                capture.timed_out = True
                deadline = float("inf")  # killed once; now wait for the exit to show
            if on_tick and now >= next_tick:
                on_tick()
                next_tick = max(next_tick + tick_s, now)
            pipes = [k for k in sel.get_map().values() if k.data != "exit"]
            if drain_until is not None and (not pipes or now >= drain_until):
                break
            wait = min(deadline, next_tick) - now if on_tick else deadline - now
            # Without open pipes select() only sleeps: poll the exit often so fast tools stay fast.
            polled = not pipes and (exit_fd is None or drain_until is not None)
            wait = min(max(wait, 0.0), 0.005 if polled else 0.05)
            for key, _ in sel.select(wait):
                if key.data == "exit":
                    continue  # read by `exited()` on the next turn
                _pump(sel, cast(IO[bytes], key.fileobj), key.data, capture, cap)
    finally:
        sel.close()
    proc.wait()
    close_pipes(proc)
    return capture


def _pump(sel: selectors.BaseSelector, pipe: IO[bytes], name: str, cap: Capture, n: int) -> None:
    chunk = os.read(pipe.fileno(), _READ_CHUNK)
    if not chunk:
        sel.unregister(pipe)
        return
    if name == "stdout":
        # Keep the head: a truncated object cannot be parsed anyway, the start shows what it was.
        room = n - len(cap.stdout)
        cap.stdout += chunk[: max(room, 0)]
        cap.stdout_truncated |= len(chunk) > room
    else:
        # Keep the tail: the last lines of stderr say why a tool died.
        cap.stderr += chunk
        if len(cap.stderr) > 2 * n:  # trim in batches, not on every chunk
            del cap.stderr[: len(cap.stderr) - n]
            cap.stderr_truncated = True


def _has_exited(pid: int) -> bool:
    """True once `pid` has exited, leaving it unreaped (WNOWAIT) so its pid stays reserved."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def close_pipes(proc: Process) -> None:
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
