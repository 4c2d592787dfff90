"""Load every registry root into one Registry snapshot, re-reading only what changed on disk.

The registry is read live (an edited manifest is seen without a restart), so `load()` is
called often: by every MCP discovery call, every dashboard page. Each call stats the files
the snapshot depends on; when nothing moved it returns the very same Registry object, and
when something did, only the changed manifests are parsed again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from webplatform.registry.manifest import load_manifest
from webplatform.registry.model import Kind, ManifestError, Registry, SkillSpec, ToolSpec
from webplatform.registry.skills import load_skill

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
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


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

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots: tuple[Path, ...] = tuple(Path(r) for r in roots)
        self._lock = threading.Lock()
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
            found, root_errors = self._scan()
            stamps = [self._current_stamps(item) for item in found]
            manifests = tuple(item.manifest for item in found)
            if self._registry is not None and self._signature == (root_errors, manifests, stamps):
                return self._registry
            # Rebuilt from `found` alone, so manifests that disappeared leave the cache.
            self._parsed = {
                item.manifest: self._parse_if_changed(item, stamp)
                for item, stamp in zip(found, stamps, strict=True)
            }
            self._registry = self._assemble(found, root_errors)
            # The stamps each result was made from; a file that changed during parsing will
            # differ from them next time and be parsed again.
            parsed_stamps = [self._parsed[m].stamp for m in manifests]
            self._signature = (root_errors, manifests, parsed_stamps)
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
            if not present:
                hint = "has no tools/, agents/ or skills/ folder; point at the folder above them"
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

    def _parse_if_changed(self, item: _Found, stamps: tuple[Stamp, Stamp]) -> _Parsed:
        cached = self._parsed.get(item.manifest)
        if cached is not None and cached.stamp == stamps:
            return cached
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
            else:
                runnables[spec.kind][spec.name] = spec
        return Registry(
            tools=dict(sorted(runnables["tool"].items())),
            agents=dict(sorted(runnables["agent"].items())),
            skills=dict(sorted(skills.items())),
            errors=tuple(errors),
        )


def _root_error(path: Path, problem: str) -> ManifestError:
    # A root is not a tool, but reporting it alongside manifest errors puts it in front of
    # whoever runs `aat check` or opens the dashboard, which is where it gets fixed.
    return ManifestError("tool", "", path, f"registry folder {path} {problem}")
