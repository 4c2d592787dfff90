"""The watched registry (real inotify, one watcher per process and roots) and the parsed-manifest
disk cache."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from descriptors import no_new_descriptors

from webplatform import inotify
from webplatform.registry import RegistryLoader
from webplatform.registry import cache as cache_module
from webplatform.registry import watch as watch_module

if TYPE_CHECKING:
    from tests.registry.conftest import RegistryDir


@pytest.fixture(autouse=True)
def quick_watcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 0.2 s grace period (1 s in aat), retries after 0.02 s, a missing root looked for
    every 0.1 s: no test here is about these lengths, and each waits for what it needs."""
    monkeypatch.setattr(watch_module, "GRACE_S", 0.2)
    monkeypatch.setattr(watch_module, "RETRY_S", 0.02)
    monkeypatch.setattr(watch_module, "ABSENT_ROOTS_S", 0.1)


@pytest.fixture
def watched(reg: RegistryDir, tmp_path: Path) -> Iterator[RegistryLoader]:
    """A watching loader on `reg` (with a disk cache), already past its first grace period."""
    reg.tool("alpha")
    loader = RegistryLoader([reg.root], watch=True, cache_dir=tmp_path / "cache")
    loader.load()
    loader.load()  # the second read starts the watcher
    wait_until(lambda: loader.watching)
    settle(loader)
    yield loader
    loader.close()


def wait_until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def settle(loader: RegistryLoader) -> None:
    """Wait out the grace period so the next reads trust the watcher's silence."""
    time.sleep(watch_module.GRACE_S + 0.1)
    loader.load()
    assert loader.watching


def test_an_unchanged_watched_registry_is_the_same_object(watched: RegistryLoader) -> None:
    assert watched.load() is watched.load()


def test_an_edit_is_seen_on_the_next_call(reg: RegistryDir, watched: RegistryLoader) -> None:
    before = watched.load()
    manifest = reg.root / "tools" / "alpha" / "tool.yaml"
    manifest.write_text(reg.tool_yaml("alpha").replace("Says hello", "Edited once"))
    # Within milliseconds on an idle machine; allow for a saturated one.
    wait_until(lambda: watched.load().tools["alpha"].description == "Edited once", timeout=2)
    assert watched.load() is not before


def test_an_edit_is_seen_even_before_the_watcher_wakes(
    reg: RegistryDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a saturated CPU the watcher thread can wake late; the edit's event is queued in the
    # kernel by then, and a queued event counts as a change.
    real_wait = inotify.Inotify.wait
    read = threading.Event()

    def late_wait(self: inotify.Inotify, timeout_s: float | None = None) -> bool:
        woke = real_wait(self, timeout_s)
        if woke:
            read.wait(10)  # still asleep when the test reads
        return woke

    monkeypatch.setattr(inotify.Inotify, "wait", late_wait)
    reg.tool("alpha")
    loader = RegistryLoader([reg.root], watch=True, cache_dir=tmp_path / "cache")
    try:
        loader.load()
        loader.load()
        wait_until(lambda: loader.watching)
        settle(loader)
        manifest = reg.root / "tools" / "alpha" / "tool.yaml"
        manifest.write_text(reg.tool_yaml("alpha").replace("Says hello", "Edited just now"))
        assert loader.load().tools["alpha"].description == "Edited just now"
    finally:
        read.set()
        loader.close()


def test_a_new_and_a_deleted_tool_are_seen_at_once(
    reg: RegistryDir, watched: RegistryLoader
) -> None:
    reg.tool("beta")
    assert sorted(watched.load().tools) == ["alpha", "beta"]
    settle(watched)
    shutil.rmtree(reg.root / "tools" / "alpha")
    assert sorted(watched.load().tools) == ["beta"]


def test_a_registry_folder_deleted_and_recreated_while_watched(
    reg: RegistryDir, watched: RegistryLoader
) -> None:
    shutil.rmtree(reg.root)
    gone = watched.load()
    assert not gone.tools
    assert "does not exist" in str(gone.errors[0])
    reg.root.mkdir()
    reg.tool("gamma")
    assert sorted(watched.load().tools) == ["gamma"]
    # The watcher restarts on the new folder; then an in-place edit there is seen too.
    wait_until(lambda: watched.watching)
    settle(watched)
    manifest = reg.root / "tools" / "gamma" / "tool.yaml"
    manifest.write_text(reg.tool_yaml("gamma").replace("Says hello", "Recreated"))
    # Seen once its event arrives (no stat scan would run: only the new watch can tell).
    wait_until(lambda: watched.load().tools["gamma"].description == "Recreated", timeout=2)


def test_without_a_watcher_every_read_scans(reg: RegistryDir) -> None:
    reg.tool("alpha")
    loader = RegistryLoader([reg.root], watch=False)
    assert loader.load() is loader.load()
    assert not loader.watching
    manifest = reg.root / "tools" / "alpha" / "tool.yaml"
    manifest.write_text(reg.tool_yaml("alpha").replace("Says hello", "Scanned"))
    reg.touch(manifest)
    assert loader.load().tools["alpha"].description == "Scanned"


def test_before_the_watcher_is_ready_reads_scan(reg: RegistryDir, tmp_path: Path) -> None:
    reg.tool("alpha")
    loader = RegistryLoader([reg.root], watch=True)
    loader.load()
    manifest = reg.root / "tools" / "alpha" / "tool.yaml"
    manifest.write_text(reg.tool_yaml("alpha").replace("Says hello", "Early"))
    reg.touch(manifest)
    # The watcher starts on this second read and cannot be ready yet: the scan answers.
    assert loader.load().tools["alpha"].description == "Early"
    loader.close()


def _cache_file(folder: Path) -> Path:
    files = list(folder.glob("registry-*.json"))
    assert len(files) == 1, files
    return files[0]


def test_a_cold_start_reuses_the_disk_cache(
    reg: RegistryDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg.tool("alpha")
    reg.tool("beta")
    cache = tmp_path / "cache"
    first = RegistryLoader([reg.root], cache_dir=cache).load()
    assert _cache_file(cache).stat().st_mode & 0o077 == 0
    parsed: list[Path] = []
    from webplatform.registry import loader as loader_module

    real = loader_module.load_manifest

    def counting(path: Path, kind: str) -> object:
        parsed.append(path)
        return real(path, kind)  # type: ignore[arg-type]

    monkeypatch.setattr(loader_module, "load_manifest", counting)
    again = RegistryLoader([reg.root], cache_dir=cache).load()
    assert again == first
    assert parsed == []
    # An edit that keeps size and mtime is still caught by the content hash.
    manifest = reg.root / "tools" / "beta" / "tool.yaml"
    st = manifest.stat()
    text = manifest.read_text()
    manifest.write_text(text.replace("Says hello", "Says hellO"))
    import os

    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))
    third = RegistryLoader([reg.root], cache_dir=cache).load()
    assert third.tools["beta"].description == "Says hellO"
    assert parsed == [manifest]


@pytest.mark.parametrize(
    "content",
    [b"not a cache at all", b"", None],
    ids=["corrupt", "empty", "other-version"],
)
def test_a_bad_cache_file_is_ignored_and_rebuilt(
    reg: RegistryDir, tmp_path: Path, content: bytes | None
) -> None:
    reg.tool("alpha")
    cache = tmp_path / "cache"
    RegistryLoader([reg.root], cache_dir=cache).load()
    path = _cache_file(cache)
    good = path.read_bytes()
    fmt = cache_module.FORMAT
    this, older = f'"schema":"{fmt}:'.encode(), f'"schema":"{fmt - 1}:'.encode()
    assert this in good
    bad = good.replace(this, older) if content is None else content
    path.write_bytes(bad)
    loaded = RegistryLoader([reg.root], cache_dir=cache).load()
    assert sorted(loaded.tools) == ["alpha"] and not loaded.errors
    assert path.read_bytes() not in (bad, b"")
    assert path.read_bytes().startswith(cache_module.MAGIC)


def test_a_file_edited_again_and_again_is_never_read_stale(
    reg: RegistryDir, watched: RegistryLoader
) -> None:
    manifest = reg.root / "tools" / "alpha" / "tool.yaml"
    manifest.write_text(reg.tool_yaml("alpha").replace("Says hello", "Edit 0"))
    wait_until(lambda: watched.load().tools["alpha"].description == "Edit 0")
    for n in range(1, 6):
        settle(watched)
        manifest.write_text(reg.tool_yaml("alpha").replace("Says hello", f"Edit {n}"))
        # No wait at all: the file is hot, so it is stat-ed on this very read.
        assert watched.load().tools["alpha"].description == f"Edit {n}"


def _inotify_instances() -> int:
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if _link(fd) == "anon_inode:inotify")


def _link(fd: Path) -> str:
    try:
        return str(fd.readlink())
    except OSError:
        return ""


def test_the_watcher_sees_an_edit_deep_in_a_tool_folder(
    reg: RegistryDir, watched: RegistryLoader
) -> None:
    watcher = watch_module.shared_watcher([reg.root])
    try:
        before = watcher.generation
        folder = reg.root / "tools" / "alpha" / "lib"
        folder.mkdir()  # a folder created after the watch began...
        wait_until(lambda: str(folder) in watcher.hot())
        entry = folder / "helper.py"
        entry.write_text("X = 1\n")  # ...is watched too
        wait_until(lambda: str(entry) in watcher.hot())
        assert watcher.generation > before
    finally:
        watch_module.release_watcher(watcher)


def test_two_platforms_on_one_registry_share_one_watcher(tmp_path: Path) -> None:
    from workspaces import aat_home_beside

    from webplatform.config import Settings
    from webplatform.platform import Platform

    registry = tmp_path / "registry"
    (registry / "tools").mkdir(parents=True)
    before = _inotify_instances()
    platforms = [
        Platform(
            Settings(
                home=aat_home_beside(tmp_path / name),
                registry=str(registry),
                watch_registry=True,
            )
        )
        for name in ("one", "two")
    ]
    loaders = [p.loader for p in platforms]
    try:
        for loader in loaders:
            loader.load()
            loader.load()  # starts the watcher
        wait_until(lambda: all(loader.watching for loader in loaders))
        first, second = (loader._watcher for loader in loaders)  # noqa: SLF001
        assert first is second
        assert _inotify_instances() == before + 1
    finally:
        for loader in loaders:
            loader.close()
        for p in platforms:
            p.engine.dispose()
    wait_until(lambda: _inotify_instances() == before)


def test_a_watch_the_kernel_refuses_falls_back_to_scanning_after_one_warning(
    reg: RegistryDir, caplog: pytest.LogCaptureFixture
) -> None:
    """No inotify instance to be had (the per-user limit reached): the loader scans, the
    watcher says so once however often it tries again, and watches once it can."""
    reg.tool("alpha")
    watcher = watch_module.RegistryWatcher([reg.root])
    inotify.supported()  # looked up once, before descriptors run out
    try:
        with caplog.at_level(logging.INFO, logger=watch_module.__name__):
            with no_new_descriptors():
                watcher.start()
                wait_until(lambda: watcher.generation >= 3)  # refused three times
                assert not watcher.ready
            wait_until(lambda: watcher.ready)
    finally:
        watcher.stop()
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert len(said) == 1, said
    assert said[0][0] == logging.WARNING and "re-scanned on every read" in said[0][1]
