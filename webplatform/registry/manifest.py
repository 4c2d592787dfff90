"""Validate one tool.yaml or agent.yaml (SPEC §2) into a ToolSpec, or into line-level errors."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from webplatform.registry.actions import ActionCheck
from webplatform.registry.checks import Collector, Where, did_you_mean
from webplatform.registry.limits import tool_limits
from webplatform.registry.model import RUNTIMES, ManifestError, RunnableKind, Runtime, ToolSpec
from webplatform.registry.network import network_reach
from webplatform.registry.paths import expand, home_problem, write_problem
from webplatform.registry.yamldoc import YamlProblem, parse_yaml

MANIFEST_KEYS = (
    "name",
    "description",
    "version",
    "runtime",
    "entrypoint",
    "secrets",
    "actions",
    "reads",
    "writes",
    "warm",
    "network",
    "limits",
)
# Stands in for AAT_HOME while a manifest is checked: which folder it is depends on settings.
_SOME_HOME = Path("/AAT_HOME")
SECRET_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class ManifestResult:
    """A loaded spec or its errors, plus the entrypoint file the result depends on."""

    spec: ToolSpec | None
    errors: tuple[ManifestError, ...]
    entrypoint: Path | None = None


def load_manifest(path: Path, kind: RunnableKind) -> ManifestResult:
    """Read and validate one manifest; never raises for a bad manifest, reports it instead."""
    folder = path.parent
    bare = Collector(kind, folder.name, path)
    try:
        doc = parse_yaml(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        bare.fail(f"{path.name} is not valid UTF-8; save it with UTF-8 encoding")
        return ManifestResult(None, tuple(bare.errors))
    except OSError as exc:
        bare.fail(f"cannot read {path.name} ({exc.strerror}); check that it is a readable file")
        return ManifestResult(None, tuple(bare.errors))
    except YamlProblem as exc:
        bare.fail(exc.message, line=exc.line)
        return ManifestResult(None, tuple(bare.errors))
    data = doc.data
    if not isinstance(data, dict):
        bare.fail(
            f"{path.name} must be a YAML mapping with name, description, runtime, "
            "entrypoint and actions",
            line=1,
        )
        return ManifestResult(None, tuple(bare.errors))
    check = _ManifestCheck(kind, folder.name, path, doc)
    spec, entrypoint = check.tool(kind, data, folder)
    return ManifestResult(spec if not check.errors else None, tuple(check.errors), entrypoint)


class _ManifestCheck(ActionCheck):
    def tool(
        self, kind: RunnableKind, data: dict[Any, Any], folder: Path
    ) -> tuple[ToolSpec | None, Path | None]:
        """The whole manifest; a spec only when nothing at all is wrong."""
        self.unknown_keys(data, MANIFEST_KEYS, "the manifest", ())
        name = self.folder_name(data, folder.name, "the manifest")
        description = self.text(data, "description", "the manifest", (), required=True)
        # `version: 1.0` arrives as a float; any scalar is fine as long as it reads as text.
        version = data.get("version") or ""
        if not isinstance(version, str | int | float) or isinstance(version, bool):
            self.fail("`version` must be text such as '0.1.0'", ("version",))
        runtime = self.runtime(data)
        entrypoint, ep_path = self.entrypoint(data, folder, runtime)
        secrets = self.secrets(data)
        reads = self.paths(data, "reads", folder)
        writes = self.paths(data, "writes", folder)
        actions = self.actions(data, name or folder.name)
        warm = self.warm(data, runtime)
        network = network_reach(self, data)
        limits = tool_limits(self, data)
        if self.errors or not (name and description and runtime and entrypoint):
            return None, ep_path
        spec = ToolSpec(
            kind,
            name,
            description,
            str(version),
            runtime,
            entrypoint,
            folder,
            self.path,
            secrets,
            actions,
            reads,
            writes,
            warm,
            network=network,
            limits=limits,
        )
        return spec, ep_path

    def runtime(self, data: dict[Any, Any]) -> Runtime | None:
        """`runtime:`, one of RUNTIMES."""
        value = self.text(data, "runtime", "the manifest", (), required=True)
        if value is None:
            return None
        if value not in RUNTIMES:
            self.fail(
                f"runtime '{value}' is not supported{did_you_mean(value, RUNTIMES)}", ("runtime",)
            )
            return None
        return value

    def warm(self, data: dict[Any, Any], runtime: Runtime | None) -> bool:
        """`warm:`, true or false; only a python tool can run warm (SPEC §12)."""
        warm = self.flag(data, "warm", "the manifest", ())
        if warm and runtime is not None and runtime != "python":
            self.fail(
                f"`warm: true` needs `runtime: python` (this tool is {runtime}); "
                "remove `warm` or set it to false",
                ("warm",),
            )
            return False
        return bool(warm)

    def entrypoint(
        self, data: dict[Any, Any], folder: Path, runtime: Runtime | None
    ) -> tuple[str | None, Path | None]:
        """`entrypoint:` and the path it names, which must stay inside the folder and exist."""
        raw = self.text(data, "entrypoint", "the manifest", (), required=True)
        if raw is None:
            return None, None
        where: Where = ("entrypoint",)
        # Windows spellings (`C:\x`) too: a manifest written on one OS may run on another.
        if PurePosixPath(raw).is_absolute() or PureWindowsPath(raw).anchor:
            self.fail(
                f"entrypoint '{raw}' is an absolute path; give it relative to the "
                f"{self.kind} folder, e.g. `entrypoint: main.py`",
                where,
            )
            return None, None
        if ".." in re.split(r"[\\/]", raw):
            self.fail(
                f"entrypoint '{raw}' leaves the {self.kind} folder; move the script "
                f"into {folder.name}/ and name it relative to that folder",
                where,
            )
            return None, None
        candidate = folder / raw
        # resolve() follows symlinks, so a link inside the folder pointing elsewhere is caught.
        real, home = candidate.resolve(), folder.resolve()
        if not real.is_relative_to(home):
            self.fail(
                f"entrypoint '{raw}' resolves outside the {self.kind} folder (through a "
                "symlink); put the real script inside the folder",
                where,
            )
            return None, candidate
        if not candidate.exists():
            self.fail(
                f"entrypoint '{raw}' does not exist in {folder}; create it or fix the path", where
            )
        elif not candidate.is_file():
            self.fail(f"entrypoint '{raw}' is not a file; point it at the script", where)
        elif runtime == "exec" and not os.access(candidate, os.X_OK):
            self.fail(
                f"entrypoint '{raw}' is not executable, which runtime exec needs; "
                f"run `chmod +x {candidate}`",
                where,
            )
        return raw, candidate

    def secrets(self, data: dict[Any, Any]) -> tuple[str, ...]:
        """`secrets:`, a list of distinct environment variable names."""
        raw = data.get("secrets")
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.fail(
                "`secrets` must be a list of environment variable names, "
                "e.g. `secrets: [GITHUB_TOKEN]`",
                ("secrets",),
            )
            return ()
        names: list[str] = []
        for i, item in enumerate(raw):
            if not isinstance(item, str) or not SECRET_NAME_RE.fullmatch(item):
                self.fail(
                    f"secret {item!r} is not an environment variable name; use letters, "
                    "digits and '_' (e.g. API_TOKEN)",
                    ("secrets", i),
                )
            elif item in names:
                self.fail(f"secret '{item}' is listed twice; remove one", ("secrets", i))
            else:
                names.append(item)
        return tuple(names)

    def paths(self, data: dict[Any, Any], key: str, folder: Path) -> tuple[str, ...]:
        """`reads:` or `writes:`, absolute once expanded, naming nothing of aat's own in
        AAT_HOME; `writes:` keeps clear of the registry and installations too."""
        raw = data.get(key)
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.fail(f"`{key}` must be a list of paths, e.g. `{key}: [$AAT_HOME/outbox]`", (key,))
            return ()
        found: list[str] = []
        for i, item in enumerate(raw):
            if not isinstance(item, str) or not item.strip():
                self.fail(f"{key} entry {item!r} must be a path in quotes", (key, i))
                continue
            try:
                path = expand(item, home=_SOME_HOME)
            except ValueError as exc:
                self.fail(f"`{key}`: {exc}", (key, i))
                continue
            # The folder holding tools/NAME is this tool's registry root.
            roots = [folder.resolve().parent.parent]
            what = f"`{key}: {item}`"
            problem = home_problem(path, home=_SOME_HOME, what=what) or (
                key == "writes"
                and write_problem(path, home=_SOME_HOME, registry_roots=roots, what=what)
            )
            if problem:
                self.fail(problem, (key, i))
                continue
            found.append(item)
        return tuple(found)
