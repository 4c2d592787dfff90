"""Watching the registry roots (inotify) so an unchanged registry costs nothing to re-read.

One background thread per process and set of roots (`shared_watcher`: every Platform of a
process with the same registry shares it, and so one inotify instance) watches every folder
under the roots that exist. It sleeps in the kernel until something changes: an idle
registry costs no wake-ups at all (`webplatform.inotify`). The loader asks `quiet(generation)`:
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
folder added, removed or renamed is seen at once. An in-place edit is seen on the very next
read, even before this thread wakes (on a saturated CPU that can take a while): the kernel
queues the event within the writer's own system call, and `quiet` counts a queued event
that was not read yet as a change. Files that changed lately (the last `HOT_FILES`) are
stat-ed on every read as well, so a tool being worked on, edited again and again, is never
read stale.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from webplatform import inotify

log = logging.getLogger(__name__)

GRACE_S = 1.0
HOT_FILES = 64
# A watch that could not start is tried again after RETRY_S; one refused by the kernel's
# limits (inotify instances or watches per user) after twice as long each time, up to this.
RETRY_S = 0.2
MAX_RETRY_S = 30.0
# No root exists yet (or any more): looked for again this often, the loader scanning meanwhile.
ABSENT_ROOTS_S = 2.0
_LIMITS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.ENOMEM})
_DIR_MASK = inotify.CHANGES | inotify.SELF_GONE | inotify.ONLYDIR


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


_shared: inotify.SharedWatches[RegistryWatcher] = inotify.SharedWatches()


def shared_watcher(roots: Sequence[Path]) -> RegistryWatcher:
    """This process's watcher for `roots` (one thread, one inotify instance per set of roots)."""
    key = tuple(Path(r) for r in roots)
    return _shared.use(key, lambda: RegistryWatcher(key))


def release_watcher(watcher: RegistryWatcher) -> None:
    """One user less; the last one stops the thread."""
    _shared.release(watcher.roots, watcher)


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
        self._inotify: inotify.Inotify | None = None
        # Set (under the lock) from the moment the thread reads queued events until it has
        # counted them: `quiet` is then false, as it is while events wait in the queue.
        self._reading = False
        self.users = 0
        self.stopped = False

    def start(self) -> None:
        """Start the thread (once); the loader scans on its own until the watch is ready."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="aat-registry-watch", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread; the loader goes back to scanning."""
        self.stopped = True
        self._stop.set()
        with self._lock:
            watch = self._inotify
        if watch is not None:
            watch.close()
        self._bump(ready=False)
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def running(self) -> bool:
        """Whether it was not stopped (a stopped watcher is replaced for its next user)."""
        return not self.stopped

    @property
    def ready(self) -> bool:
        """Whether the watch is running (events from now on are seen)."""
        return self._ready

    def quiet(self, generation: int) -> bool:
        """Whether the registry provably has not changed since a scan at `generation`.

        An event the kernel has queued but this thread has not taken in yet counts as a
        change: the thread takes the lock before it reads, so under the lock an event is
        either still queued, being taken in (`_reading`), or counted in `generation`.
        """
        with self._lock:
            if not self._ready or generation != self.generation or self._reading:
                return False
            if self._inotify is None or self._inotify.pending():
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
        if not inotify.supported():  # pragma: no cover - Linux has it; the scan still works
            log.warning("inotify is not available; the registry is re-scanned on every read")
            return
        backoff = RETRY_S
        while not self._stop.is_set():
            inodes = tuple(_inode(r) for r in self.roots)
            existing = [str(r) for r, ino in zip(self.roots, inodes, strict=True) if ino]
            if not existing:
                # Nothing to watch yet: look again now and then, scanning meanwhile.
                self._stop.wait(ABSENT_ROOTS_S)
                continue
            try:
                self._watch(existing, inodes)
            except OSError as exc:
                self._bump(ready=False)
                if exc.errno not in _LIMITS:  # a root vanished under the watch
                    log.info("registry watch restarting: %s", exc)
                    self._stop.wait(RETRY_S)
                    continue
                # The kernel's inotify limits: said once, tried again less and less often.
                if backoff == RETRY_S:
                    log.warning(
                        "cannot watch the registry (%s); it is re-scanned on every read "
                        "until the watch can start",
                        exc,
                    )
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_RETRY_S)
                continue
            backoff = RETRY_S

    def _watch(self, roots: list[str], inodes: tuple[int | None, ...]) -> None:
        watch = inotify.Inotify()
        with self._lock:
            self._inotify = watch
        if self._stop.is_set():
            watch.close()
        try:
            folders: dict[int, str] = {}
            root_wds = {self._add_tree(watch, folders, root) for root in roots}
            # The watch exists from here on; scans made before this are not covered.
            with self._lock:
                self._inodes = inodes
            self._bump(ready=True)
            while not watch.closed:
                if not watch.wait():  # sleeps until something changes, or `stop`
                    continue
                with self._lock:
                    self._reading = True
                try:
                    if not self._take_in(watch, folders, root_wds, inodes):
                        return
                finally:
                    with self._lock:
                        self._reading = False
        finally:
            with self._lock:
                self._inotify = None
            watch.close()
            watch.read(0)  # releases its descriptors

    def _take_in(
        self,
        watch: inotify.Inotify,
        folders: dict[int, str],
        root_wds: set[int],
        inodes: tuple[int | None, ...],
    ) -> bool:
        """Read the queued events and count them; False when the watch went blind."""
        changed = []
        for event in watch.read(0):
            if event.mask & inotify.Q_OVERFLOW or (
                event.wd in root_wds and event.mask & inotify.SELF_GONE
            ):
                # Events were lost, or a root was deleted or moved: its watch is blind.
                self._bump(ready=False)
                return False
            folder = folders.get(event.wd)
            if folder is None or not event.name:
                continue
            path = os.path.join(folder, event.name)
            changed.append(path)
            if event.mask & inotify.ISDIR and event.mask & (inotify.CREATE | inotify.MOVED_TO):
                self._add_tree(watch, folders, path)
        if changed:
            self._note(changed)
        if tuple(_inode(r) for r in self.roots) != inodes:
            self._bump(ready=False)  # a root appeared or was recreated
            return False
        return True

    def _add_tree(self, watch: inotify.Inotify, folders: dict[int, str], top: str) -> int:
        """Watch `top` and every folder below it; the watch descriptor of `top`."""
        first = watch.add(top, _DIR_MASK)
        folders[first] = top
        for folder, subdirs, _ in os.walk(top):
            for name in subdirs:
                path = os.path.join(folder, name)
                try:
                    folders[watch.add(path, _DIR_MASK)] = path
                except OSError:  # removed meanwhile: its parent's event says so
                    continue
        return first

    def _note(self, changed: list[str]) -> None:
        with self._lock:
            for path in changed:
                self._hot.pop(path, None)
                self._hot[path] = None
            while len(self._hot) > HOT_FILES:
                del self._hot[next(iter(self._hot))]
        self._bump()
