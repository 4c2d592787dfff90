"""Scratch folders removed off the call's path: a thread removes each once its call is done.

Removing a folder waits on the file system's journal, which on a busy host takes milliseconds
(3-7 ms for one empty folder, measured on a 2-core VM while other processes wrote), so a
call's answer no longer waits for it. Nothing reaches a folder meanwhile: it is the caller's
own (0700), its tool's whole process group is gone, and later calls get folders of their own.
`settle()` waits until the folders handed over so far are gone; what is left when the
interpreter exits is removed then.
"""

from __future__ import annotations

import atexit
import shutil
import threading
from collections import deque
from pathlib import Path

_changed = threading.Condition()
_pending: deque[Path] = deque()
_thread: threading.Thread | None = None


def remove_later(folder: Path) -> None:
    """Remove `folder` and all in it, soon, on this process's sweeper thread."""
    global _thread
    with _changed:
        _pending.append(folder)
        if _thread is None or not _thread.is_alive():  # the first, or after a fork
            _thread = threading.Thread(target=_sweep, name="aat-scratch-sweep", daemon=True)
            _thread.start()
        _changed.notify_all()


def settle(timeout_s: float | None = None) -> bool:
    """Wait until every folder handed to `remove_later` so far is removed; False on timeout."""
    with _changed:
        return _changed.wait_for(lambda: not _pending, timeout=timeout_s)


def _sweep() -> None:
    while True:
        with _changed:
            _changed.wait_for(lambda: bool(_pending))
            folder = _pending[0]
        shutil.rmtree(folder, ignore_errors=True)
        with _changed:
            _pending.popleft()
            _changed.notify_all()


@atexit.register
def _remove_the_rest() -> None:
    with _changed:
        left = list(_pending)
    for folder in left:
        shutil.rmtree(folder, ignore_errors=True)
