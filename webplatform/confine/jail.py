"""A jail for one tool run: its scratch folder, its Landlock rules, what confines the child.

The rules become a Landlock ruleset in aat's own process (every path opened and checked
there); the spawned child, between fork and exec, only enforces it with two system calls
through function pointers resolved beforehand (`landlock.confiner`). The server process is
multi-threaded, which is why the child does nothing else there: no Python import, no dlopen,
no lock another thread could have held at fork. A separate launcher interpreter per call,
as before, cost about 20 ms a call for the same rules.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from webplatform.confine import landlock
from webplatform.confine.fence import Fence, workspaces_for
from webplatform.registry.model import ToolSpec
from webplatform.registry.paths import (
    expand,
    home_problem,
    interpreter_prefixes,
    write_problem,
)

# Read-only system paths a runtime needs. /etc is listed file by file: it can hold secrets.
SYSTEM_READS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ssl",
    "/etc/pki",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/locale.alias",
    "/etc/mime.types",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/os-release",
    "/proc/self",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/sys/devices/system/cpu",
    "/dev/urandom",
    "/dev/random",
)
DEVICE_WRITES = ("/dev/null", "/dev/zero", "/dev/full")

UNAVAILABLE = (
    "tools are not run: this kernel has no Landlock to confine them (needs Linux 5.13+ with "
    "Landlock enabled); to run them unconfined anyway, the operator sets AAT_UNCONFINED=1"
)


@dataclass
class Jail:
    """How one run is confined: its rules, environment additions, and its scratch folder;
    `note` says why the caller's folder is not among its workspaces (see `workspaces_for`).

    Use it as a context manager: leaving it removes the scratch folder (and the ruleset).
    """

    scratch: Path
    rules: dict[str, list[str]] | None = None
    env: dict[str, str] = field(default_factory=dict)
    note: str | None = None
    _ruleset: int | None = None

    def preexec(self) -> Callable[[], None] | None:
        """What the child runs between fork and exec to confine itself (None: unconfined).

        Builds the Landlock ruleset here, in the parent; raises OSError when the kernel
        refuses a rule, and then the tool must not run.
        """
        if self.rules is None:
            return None
        if self._ruleset is None:
            self._ruleset = landlock.ruleset(self.rules["read"], self.rules["write"])
        return landlock.confiner(self._ruleset, self.rules["read"], self.rules["write"])

    def __enter__(self) -> Jail:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._ruleset is not None:
            os.close(self._ruleset)
            self._ruleset = None
        shutil.rmtree(self.scratch, ignore_errors=True)


def available(fence: Fence) -> bool:
    """Whether tools can be confined here."""
    return not fence.pretend_unavailable and landlock.abi_version() >= 1


def lock(tool: ToolSpec, fence: Fence, caller_cwd: Path | None) -> Jail | str:
    """The jail for one run of `tool`, or a one-line reason it must not run at all."""
    confined = available(fence)
    if not confined and not fence.unconfined:
        return UNAVAILABLE
    workspaces = workspaces_for(fence, caller_cwd)
    if isinstance(workspaces, str):
        return workspaces
    declared = _declared(tool, fence)
    if isinstance(declared, str):
        return declared
    reads, writes = declared
    scratch = Path(tempfile.mkdtemp(prefix=f"aat-{tool.name}-"))
    # Tools learn their workspaces so they can say where they may write before they try.
    env = {"TMPDIR": str(scratch), "AAT_WORKSPACES": ":".join(str(w) for w in workspaces.paths)}
    jail = Jail(scratch, env=env, note=workspaces.note)
    if confined:
        jail.rules = {
            "read": [
                *SYSTEM_READS,
                *_interpreter_reads(),
                str(tool.folder.resolve()),
                *(str(p) for p in reads),
            ],
            "write": [
                str(scratch),
                *(str(p) for p in [*workspaces.paths, *writes]),
                *DEVICE_WRITES,
            ],
        }
        exposed = _exposed(jail.rules, fence)
        if exposed:
            jail.__exit__(None, None, None)
            return exposed
    return jail


def _exposed(rules: dict[str, list[str]], fence: Fence) -> str | None:
    """A last check that no rule reaches aat's own state (say, AAT_HOME under /opt)."""
    secrets = [(secret, str(secret)) for secret in fence.secret_paths]
    fixed = _fixed_rules()
    for rule in (*rules["read"], *rules["write"]):
        path = fixed.get(rule) or Path(rule).resolve()
        folder = str(path).rstrip("/") + "/"  # resolved paths: a prefix test is exact
        for secret, text in secrets:
            if text == str(path) or text.startswith(folder):
                return (
                    f"aat's own state ({secret}) lies inside {path}, which tools may read; "
                    "move AAT_HOME (and the database) to a folder of its own"
                )
    return None


@functools.cache
def _fixed_rules() -> dict[str, Path]:
    """The rules every run has (system and interpreter paths), resolved once per process."""
    fixed = [*SYSTEM_READS, *DEVICE_WRITES, *(str(p) for p in interpreter_prefixes())]
    return {rule: Path(rule).resolve() for rule in fixed}


@functools.cache
def _interpreter_reads() -> tuple[str, ...]:
    return (
        *(str(p) for p in interpreter_prefixes()),
        str(Path(sys.executable).resolve().parent),
    )


def _declared(tool: ToolSpec, fence: Fence) -> tuple[list[Path], list[Path]] | str:
    """The manifest's `reads:` and `writes:`, expanded and checked against this host's fence."""
    home = fence.home.expanduser().resolve()
    reads: list[Path] = []
    writes: list[Path] = []
    for raws, into in ((tool.reads, reads), (tool.writes, writes)):
        key = "writes" if into is writes else "reads"
        for raw in raws:
            try:
                path = expand(raw, home=home)
            except ValueError as exc:
                return f"{tool.name}: `{key}`: {exc}"
            problem = _declared_problem(path, key, raw, fence, home)
            if problem:
                return f"{tool.name}: {problem}; fix {tool.manifest_path.name}"
            if key == "writes" and not path.exists():
                path.mkdir(parents=True, exist_ok=True)  # Landlock rules need the folder
            into.append(path)
    return reads, writes


def _declared_problem(path: Path, key: str, raw: str, fence: Fence, home: Path) -> str | None:
    what = f"`{key}: {raw}`"
    for secret in fence.secret_paths:
        if secret.is_relative_to(path):
            return f"{what} is or contains aat's own state ({secret})"
    # The rule is opened through symlinks: what it names and where it leads must both be
    # allowed (a data folder that is a link to AAT_HOME/cache would grant the cache).
    for candidate in dict.fromkeys((path, path.resolve())):
        if key == "writes":
            roots = fence.registry_roots
            problem = write_problem(candidate, home=home, registry_roots=roots, what=what)
        else:
            problem = home_problem(candidate, home=home, what=what)
        if problem:
            return problem
    return None
