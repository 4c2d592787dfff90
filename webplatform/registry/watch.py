"""Watching the registry roots (inotify through `watchfiles`) so an unchanged registry costs
nothing to re-read.

A background thread watches every root that exists. The loader asks `quiet(generation)`:
"has nothing moved since I last scanned at this generation?". It answers yes only when the
watcher is running and ready, no event arrived since, no event arrived in the last
`GRACE_S` seconds, and every root is still the same directory it started watching (same
inode; a root deleted and recreated is a new directory the old watch cannot see). Otherwise
the loader falls back to its stat scan of every manifest, which is always correct.

The grace period covers what inotify does not promise: a folder created inside a watched
root gets its own watch only after the create event is read, so files written into it at
once could be missed; and an editor's save is often several events. For `GRACE_S` after any
event every call re-stats the registry, and only after that does the watcher's silence
count. The loader also stats each ROOT/{tools,agents,skills} folder on every read, so a tool
folder added, removed or renamed is seen at once. What remains for an in-place edit of a file
is the time its event takes from the kernel to this thread: the watcher polls its event set
every `STEP_MS` and returns after one quiet step, so about 2 x `STEP_MS` on an idle machine
(more when the CPU is saturated); an edit older than that is always seen. Files that changed
lately (the last `HOT_FILES`) are stat-ed on every read as well, so a tool being worked on,
edited again and again, is never read stale; only the first edit of a file nobody touched
lately depends on the event's delivery.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)

STEP_MS = 5
GRACE_S = 1.0
HOT_FILES = 64
# How long the thread waits in Rust before it looks at its own state again.
_TIMEOUT_MS = 200


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


class RegistryWatcher:
    """One daemon thread watching the existing roots; restarts itself when a root changes."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = tuple(roots)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        # Bumped on every event and whenever the watch (re)starts; a scan made at an older
        # generation is stale.
        self.generation = 0
        self._ready = False
        self._last_event = 0.0
        self._inodes: tuple[int | None, ...] = ()
        self._thread: threading.Thread | None = None
        # The files the watcher has seen change lately, most recent last: the loader stats
        # these on every read, so a file being edited again is seen before its next event.
        self._hot: dict[str, None] = {}

    def start(self) -> None:
        """Start the thread (once); the loader scans on its own until the watch is ready."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="aat-registry-watch", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread; the loader goes back to scanning."""
        self._stop.set()
        self._bump(ready=False)
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def ready(self) -> bool:
        """Whether the watch is running (events from now on are seen)."""
        return self._ready

    def quiet(self, generation: int) -> bool:
        """Whether the registry provably has not changed since a scan at `generation`."""
        with self._lock:
            if not self._ready or generation != self.generation:
                return False
            if time.monotonic() - self._last_event < GRACE_S:
                return False
            inodes = self._inodes
        return tuple(_inode(r) for r in self.roots) == inodes

    def hot(self) -> tuple[str, ...]:
        """Files that changed lately (at most `HOT_FILES`), to stat on every read."""
        with self._lock:
            return tuple(self._hot)

    def _bump(self, *, ready: bool | None = None) -> None:
        with self._lock:
            self.generation += 1
            self._last_event = time.monotonic()
            if ready is not None:
                self._ready = ready

    def _run(self) -> None:
        try:
            import watchfiles
        except ImportError:  # pragma: no cover - a dependency; the scan still works without it
            log.warning("watchfiles is not installed; the registry is re-scanned on every read")
            return
        while not self._stop.is_set():
            inodes = tuple(_inode(r) for r in self.roots)
            existing = [str(r) for r, ino in zip(self.roots, inodes, strict=True) if ino]
            if not existing:
                # Nothing to watch yet: look again shortly, scanning meanwhile.
                self._stop.wait(0.5)
                continue
            try:
                self._watch(watchfiles, existing, inodes)
            except Exception as exc:  # a root vanished under the watch, inotify limits...
                log.info("registry watch restarting: %s", exc)
                self._bump(ready=False)
                self._stop.wait(0.2)

    def _watch(self, watchfiles: object, paths: list[str], inodes: tuple[int | None, ...]) -> None:
        changes_iter = watchfiles.watch(  # type: ignore[attr-defined]
            *paths,
            watch_filter=None,
            debounce=50,
            step=STEP_MS,
            stop_event=self._stop,
            rust_timeout=_TIMEOUT_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
            ignore_permission_denied=True,
        )
        first = True
        for changes in changes_iter:
            if first:
                # The watch exists from here on; scans made before this are not covered.
                with self._lock:
                    self._inodes = inodes
                self._bump(ready=True)
                first = False
            if changes:
                with self._lock:
                    for _, path in changes:
                        self._hot.pop(path, None)
                        self._hot[path] = None
                    while len(self._hot) > HOT_FILES:
                        del self._hot[next(iter(self._hot))]
                self._bump()
            touched_root = any(path in paths for _, path in changes)
            if touched_root or tuple(_inode(r) for r in self.roots) != inodes:
                # A root was deleted, recreated or appeared: its old watch is blind. (The
                # event matters: a recreated folder can get the old inode number back.)
                self._bump(ready=False)
                return
