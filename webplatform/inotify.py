"""Blocking waits for file changes: Linux inotify through its three system calls (ctypes).

`watchfiles` (the Rust `notify` crate) cannot block: its loop sleeps `step` milliseconds,
then takes the GIL to look for events, so an idle watcher still wakes hundreds of times a
second. A thread reading this descriptor sleeps in the kernel until something changes (or
until `close`), and learns of a change as soon as the kernel reports it.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import fcntl
import functools
import os
import select
import struct
import sys
import termios
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

# inotify(7) event bits.
MODIFY, ATTRIB, CLOSE_WRITE = 0x2, 0x4, 0x8
MOVED_FROM, MOVED_TO, CREATE, DELETE = 0x40, 0x80, 0x100, 0x200
DELETE_SELF, MOVE_SELF = 0x400, 0x800
Q_OVERFLOW, IGNORED, ISDIR = 0x4000, 0x8000, 0x40000000
ONLYDIR = 0x01000000
CHANGES = MODIFY | ATTRIB | CLOSE_WRITE | MOVED_FROM | MOVED_TO | CREATE | DELETE
SELF_GONE = DELETE_SELF | MOVE_SELF | IGNORED
_HEADER = struct.Struct("iIII")
_NONBLOCK, _CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC


@dataclass(frozen=True)
class Event:
    """One change: the watch it came from, what happened (`mask`), the file's name in it."""

    wd: int
    mask: int
    name: str


def supported() -> bool:
    """Whether this system has inotify."""
    return sys.platform.startswith("linux") and _libc() is not None


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1  # noqa: B018 - present?
    except (OSError, AttributeError):
        return None
    return libc


class Inotify:
    """One inotify instance and a way to interrupt a blocked `read` (`close` from any thread).

    Raises OSError when the kernel refuses (no inotify, or the per-user instance limit).
    """

    def __init__(self) -> None:
        libc = _libc()
        if libc is None:
            raise OSError(0, "inotify is not available here")
        self._libc = libc
        fd = libc.inotify_init1(_NONBLOCK | _CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd = fd
        self._wake_r, self._wake_w = os.pipe2(_NONBLOCK | _CLOEXEC)
        self._fds: tuple[int, ...] = (fd, self._wake_r, self._wake_w)
        self.closed = False

    def add(self, path: str, mask: int) -> int:
        """Watch `path` for `mask`; the watch descriptor (OSError when the kernel refuses)."""
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), ctypes.c_uint32(mask))
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_add_watch({path}): {os.strerror(err)}")
        return int(wd)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until events are queued (True), `timeout_s` passes or `close` is called
        (False, with `closed` set); nothing is read."""
        if self.closed:
            self._release()
            return False
        # poll, not select: select cannot take a descriptor numbered 1024 or above.
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        ready = [fd for fd, _ in poller.poll(None if timeout_s is None else timeout_s * 1000)]
        if self._wake_r in ready or self.closed:
            self._release()
            return False
        return self.fd in ready

    def pending(self) -> bool:
        """Whether events are queued and not read yet (True, too, when that cannot be told)."""
        count = array.array("i", [0])
        try:
            fcntl.ioctl(self.fd, termios.FIONREAD, count, True)
        except (OSError, ValueError):
            return True
        return count[0] > 0

    def read(self, timeout_s: float | None = None) -> list[Event]:
        """The events that arrived, blocking until one does, `timeout_s` passes ([]), or
        `close` is called ([] with `closed` set)."""
        if not self.wait(timeout_s):
            return []
        try:
            data = os.read(self.fd, 64 * 1024)
        except BlockingIOError:
            return []
        events = []
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            name = data[offset : offset + size].rstrip(b"\0")
            offset += size
            events.append(Event(wd, mask, os.fsdecode(name)))
        return events

    def close(self) -> None:
        """Wake a blocked `read`; the reading thread then releases the instance."""
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")

    def _release(self) -> None:
        fds, self._fds = self._fds, ()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(AttributeError):
            self._release()


class Shareable(Protocol):
    """A running watch that several users in a process share."""

    users: int

    @property
    def running(self) -> bool:
        """Whether it still watches (False: a new one replaces it for the next user)."""
        ...

    def stop(self) -> None:
        """Stop watching and release its thread and inotify instance."""
        ...


W = TypeVar("W", bound=Shareable)


class SharedWatches(Generic[W]):
    """This process's running watches by key (a set of folders, a file), one per key and
    shared by its users: each thread and inotify instance counts against per-user limits."""

    def __init__(self) -> None:
        self._by_key: dict[Hashable, W] = {}
        self._lock = threading.Lock()

    def use(self, key: Hashable, start: Callable[[], W]) -> W:
        """The running watch of `key`, or a new one from `start` (what it raises, when it
        cannot start, goes to the caller); give it back with `release`."""
        with self._lock:
            watch = self._by_key.get(key)
            if watch is None or not watch.running:
                watch = self._by_key[key] = start()
            watch.users += 1
            return watch

    def release(self, key: Hashable, watch: W) -> None:
        """One user less of `watch`; the last one stops it."""
        with self._lock:
            watch.users -= 1
            if watch.users > 0:
                return
            if self._by_key.get(key) is watch:
                del self._by_key[key]
        watch.stop()
