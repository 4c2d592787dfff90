"""Load every registry root into one Registry snapshot, re-reading only what changed on disk.

The registry is read live (an edited manifest is seen without a restart), so `load()` is
called often: by every MCP discovery call, every dashboard page. Each call stats the files
the snapshot depends on; when nothing moved it returns the very same Registry object, and
when something did, only the changed manifests are parsed again.

With `watch=True` a background watcher (`watch.py`) tells the loader when nothing moved, so a
read of an unchanged registry skips even the stat calls; until the watcher is ready, or where
watching is unavailable, the stat scan is the fallback. With a `cache_dir`, parsed manifests
are kept on disk (`cache.py`) so a new process does not parse unchanged YAML again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from webplatform.registry.cache import (
    Entry,
    FileKey,
    ManifestCache,
    content_hash,
    file_key,
    stat_or_none,
)
from webplatform.registry.limits import over_ceiling
from webplatform.registry.manifest import load_manifest
from webplatform.registry.model import (
    Kind,
    ManifestError,
    Registry,
    SkillSpec,
    ToolLimits,
    ToolSpec,
)
from webplatform.registry.skills import load_skill
from webplatform.registry.watch import release_watcher, shared_watcher

# (kind, folder under each root, file inside each NAME folder)
_LAYOUT: tuple[tuple[Kind, str, str], ...] = (
    ("tool", "tools", "tool.yaml"),
    ("agent", "agents", "agent.yaml"),
    ("skill", "skills", "SKILL.md"),
)

# mtime, size and inode: an editor that saves by writing a new file and renaming it over the
# old one changes the inode even when mtime granularity hides the edit.
Stamp = tuple[int, int, int] | None


def _stamp(path: str | Path | None) -> Stamp:
    st = stat_or_none(path)
    return None if st is None else (st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass(frozen=True)
class _Found:
    kind: Kind
    manifest: Path


@dataclass(frozen=True)
class _Parsed:
    # (manifest, entrypoint) stamps as they were when this result was made.
    stamp: tuple[Stamp, Stamp]
    entrypoint: Path | None
    spec: ToolSpec | SkillSpec | None
    errors: tuple[ManifestError, ...]


class RegistryLoader:
    """Loads `ROOT/{tools,agents,skills}/NAME/...` from each root, in order; thread-safe."""

    def __init__(
        self,
        roots: Sequence[Path],
        *,
        watch: bool = False,
        cache_dir: Path | None = None,
        ceilings: ToolLimits | None = None,
    ) -> None:
        self.roots: tuple[Path, ...] = tuple(Path(r) for r in roots)
        # The `AAT_MAX_*` ceilings a tool's `limits:` must keep within (None: not checked).
        self.ceilings = ceilings
        self._lock = threading.Lock()
        self._watcher = shared_watcher(self.roots) if watch else None
        self._scanned_generation = -1
        self._disk = ManifestCache(cache_dir, self.roots) if cache_dir is not None else None
        self._stored: dict[Path, Entry] | None = None
        self._save_timer: threading.Timer | None = None
        # Every ROOT/{tools,agents,skills} folder and its stamp at the last scan: checked on
        # every watched read, so a tool folder added, removed or renamed is seen at once,
        # before its event has come through the watcher.
        self._folders = tuple(root / subdir for root in self.roots for _, subdir, _ in _LAYOUT)
        self._folder_stamps: tuple[Stamp, ...] = ()
        self._hot_stamps: tuple[tuple[str, Stamp], ...] = ()
        self._parsed: dict[Path, _Parsed] = {}
        self._signature: object = None
        self._registry: Registry | None = None
        # Per listed folder: the names seen last time and the items built from them. Reusing
        # the same Path objects keeps their cached str and hash, which is most of what a
        # warm load of a large registry would otherwise spend.
        self._listed: dict[Path, tuple[list[str], list[_Found]]] = {}

    def load(self) -> Registry:
        """The current registry: the same object as last time if no file changed.

        Never raises for a bad manifest or skill: each becomes a ManifestError in
        `Registry.errors`, and everything else still loads. When two roots hold the same name,
        the first root wins and the later one is reported as an error.
        """
        with self._lock:
            watcher = self._watcher
            if (
                watcher is not None
                and self._registry is not None
                and watcher.quiet(self._scanned_generation)
                and tuple(_stamp(f) for f in self._folders) == self._folder_stamps
                and all(_stamp(f) == stamp for f, stamp in self._hot_stamps)
            ):
                return self._registry
            # Read before scanning: an event during the scan makes the next call scan again.
            generation = watcher.generation if watcher is not None else -1
            first = self._registry is None
            folder_stamps = tuple(_stamp(f) for f in self._folders)
            hot = watcher.hot() if watcher is not None else ()
            hot_stamps = tuple((f, _stamp(f)) for f in hot)
            registry = self._load()
            self._folder_stamps = folder_stamps
            self._hot_stamps = hot_stamps
            self._scanned_generation = generation
            if watcher is not None and not first:
                # From the second read on: a one-shot command reads once and needs no thread.
                watcher.start()
            return registry

    @property
    def watching(self) -> bool:
        """Whether reads are answered from the watcher's silence rather than a stat scan."""
        return self._watcher is not None and self._watcher.ready

    def close(self) -> None:
        """Stop watching and write the disk cache now if a write is pending."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            release_watcher(watcher)
        timer, self._save_timer = self._save_timer, None
        if timer is not None and timer.is_alive():
            timer.cancel()
            self._save_locked()

    def _load(self) -> Registry:
        cold = not self._parsed
        reparsed = [0]
        found, root_errors = self._scan()
        stamps = [self._current_stamps(item) for item in found]
        manifests = tuple(item.manifest for item in found)
        if self._registry is not None and self._signature == (root_errors, manifests, stamps):
            return self._registry
        # Rebuilt from `found` alone, so manifests that disappeared leave the cache.
        self._parsed = {
            item.manifest: self._parse_if_changed(item, stamp, reparsed)
            for item, stamp in zip(found, stamps, strict=True)
        }
        self._registry = self._assemble(found, root_errors)
        # The stamps each result was made from; a file that changed during parsing will
        # differ from them next time and be parsed again.
        parsed_stamps = [self._parsed[m].stamp for m in manifests]
        self._signature = (root_errors, manifests, parsed_stamps)
        if self._disk is not None and reparsed[0]:
            # A cold start writes at once (a one-shot CLI may exit next); an edit in a
            # long-running process writes a moment later, off the call's path.
            if cold:
                self._save()
            else:
                self._save_soon()
        return self._registry

    def _scan(self) -> tuple[list[_Found], tuple[ManifestError, ...]]:
        found: list[_Found] = []
        errors: list[ManifestError] = []
        for root in self.roots:
            if not root.is_dir():
                errors.append(_root_error(root, "does not exist; fix AAT_REGISTRY or --registry"))
                continue
            present = False
            for kind, subdir, filename in _LAYOUT:
                try:
                    with os.scandir(root / subdir) as entries:
                        # Dot and underscore folders are editor, VCS or cache litter
                        # (`.git`, `__pycache__`), or a tool the author parked on purpose.
                        names = sorted(
                            e.name
                            for e in entries
                            if e.is_dir() and not e.name.startswith((".", "_"))
                        )
                except (FileNotFoundError, NotADirectoryError):
                    continue
                except OSError as exc:
                    errors.append(_root_error(root / subdir, f"cannot list it ({exc.strerror})"))
                    continue
                present = True
                found.extend(self._items(kind, root / subdir, filename, names))
            if not present and not (root / "servers").is_dir():  # servers: see servers.py
                hint = (
                    "has no tools/, agents/, skills/ or servers/ folder; "
                    "point at the folder above them"
                )
                errors.append(_root_error(root, hint))
        return found, tuple(errors)

    def _items(self, kind: Kind, folder: Path, filename: str, names: list[str]) -> list[_Found]:
        listed = self._listed.get(folder)
        if listed is not None and listed[0] == names:
            return listed[1]
        items = [_Found(kind, folder / name / filename) for name in names]
        self._listed[folder] = (names, items)
        return items

    def _current_stamps(self, item: _Found) -> tuple[Stamp, Stamp]:
        # The entrypoint is only known from the last parse; a new manifest has none yet and
        # is parsed anyway, because its manifest stamp is not in the cache.
        cached = self._parsed.get(item.manifest)
        entrypoint = cached.entrypoint if cached is not None else None
        return (_stamp(item.manifest), _stamp(entrypoint))

    def _parse_if_changed(
        self, item: _Found, stamps: tuple[Stamp, Stamp], reparsed: list[int]
    ) -> _Parsed:
        cached = self._parsed.get(item.manifest)
        if cached is not None and cached.stamp == stamps:
            return cached
        stored = self._from_disk(item, stamps)
        if stored is not None:
            return stored
        reparsed[0] += 1
        folder = item.manifest.parent
        if stamps[0] is None:
            problem = f"{folder.name}/ has no {item.manifest.name}; add one or remove the folder"
            missing = ManifestError(item.kind, folder.name, item.manifest, problem)
            return _Parsed(stamps, None, None, (missing,))
        if item.kind == "skill":
            skill = load_skill(item.manifest)
            return _Parsed((stamps[0], None), None, skill.spec, skill.errors)
        result = load_manifest(item.manifest, item.kind)
        # The manifest's stamp from before parsing: if it is edited while being parsed, the
        # next load sees a newer stamp and parses again rather than keeping a stale result.
        # The entrypoint is stamped after, as it is only known now.
        stamp = (stamps[0], _stamp(result.entrypoint))
        return _Parsed(stamp, result.entrypoint, result.spec, result.errors)

    def _assemble(self, found: list[_Found], root_errors: tuple[ManifestError, ...]) -> Registry:
        runnables: dict[Kind, dict[str, ToolSpec]] = {"tool": {}, "agent": {}}
        skills: dict[str, SkillSpec] = {}
        errors = list(root_errors)
        for item in found:
            parsed = self._parsed[item.manifest]
            errors.extend(parsed.errors)
            spec = parsed.spec
            if spec is None:
                continue
            if isinstance(spec, SkillSpec):
                first: ToolSpec | SkillSpec | None = skills.get(spec.name)
            else:
                first = runnables[spec.kind].get(spec.name)
            if first is not None:
                where = first.path if isinstance(first, SkillSpec) else first.manifest_path
                problem = (
                    f"{item.kind} '{spec.name}' is already defined in {where}, an earlier "
                    "registry root; rename this one or remove it"
                )
                errors.append(ManifestError(item.kind, spec.name, item.manifest, problem))
            elif isinstance(spec, SkillSpec):
                skills[spec.name] = spec
            elif self.ceilings and (above := over_ceiling(spec.limits, self.ceilings)):
                line = _key_line(item.manifest, "limits")
                errors.append(ManifestError(item.kind, spec.name, item.manifest, above, line))
            else:
                runnables[spec.kind][spec.name] = spec
        return Registry(
            tools=dict(sorted(runnables["tool"].items())),
            agents=dict(sorted(runnables["agent"].items())),
            skills=dict(sorted(skills.items())),
            errors=tuple(errors),
        )

    def _from_disk(self, item: _Found, stamps: tuple[Stamp, Stamp]) -> _Parsed | None:
        if self._disk is None or stamps[0] is None:
            return None
        if self._stored is None:
            self._stored = self._disk.read()
        entry = self._stored.get(item.manifest)
        if entry is None or entry.manifest != (stamps[0][1], stamps[0][0]):
            return None
        entrypoint = entry.entrypoint_path
        if entry.entrypoint != file_key(entrypoint):
            return None
        if entry.digest != content_hash(item.manifest):
            return None
        # The stored result with today's stamps (inodes differ in a copied registry).
        spec = entry.tool or entry.skill
        return _Parsed((stamps[0], _stamp(entrypoint)), entrypoint, spec, entry.errors)

    def _save_soon(self) -> None:
        if self._save_timer is not None:
            self._save_timer.cancel()
        self._save_timer = threading.Timer(2.0, self._save_locked)
        self._save_timer.daemon = True
        self._save_timer.start()

    def _save_locked(self) -> None:
        with self._lock:
            self._save()

    def _save(self) -> None:
        if self._disk is None:
            return
        entries: dict[Path, Entry] = {}
        previous = self._stored or {}
        for path, parsed in self._parsed.items():
            if parsed.stamp[0] is None:
                continue
            key = (parsed.stamp[0][1], parsed.stamp[0][0])
            old = previous.get(path)
            entry_key = file_key(parsed.entrypoint)
            if old is not None and old.manifest == key and old.entrypoint == entry_key:
                entries[path] = old
                continue
            digest = content_hash(path)
            if digest is not None:
                entries[path] = _entry(key, digest, entry_key, parsed)
        self._stored = entries
        self._disk.write(entries)


def _entry(key: FileKey, digest: str, entrypoint: FileKey, parsed: _Parsed) -> Entry:
    spec = parsed.spec
    return Entry(
        manifest=key,
        digest=digest,
        entrypoint=entrypoint,
        entrypoint_path=parsed.entrypoint,
        tool=spec if isinstance(spec, ToolSpec) else None,
        skill=spec if isinstance(spec, SkillSpec) else None,
        errors=parsed.errors,
    )


def _key_line(path: Path, key: str) -> int | None:
    """The line of the manifest's top-level `key:` (read again only for an error's sake)."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return next((n for n, line in enumerate(lines, 1) if line.startswith(f"{key}:")), None)


def _root_error(path: Path, problem: str) -> ManifestError:
    # A root is not a tool, but reporting it alongside manifest errors puts it in front of
    # whoever runs `aat check` or opens the dashboard, which is where it gets fixed.
    return ManifestError("tool", "", path, f"registry folder {path} {problem}")
