"""What a tool that failed on its confinement is told: the path it was refused, and how an
operator allows it (SPEC §17).

The operating system's refusal reaches the job as the tool printed it (`Permission denied:
'/data/x'`, `EACCES: permission denied, open '/data/x'`, `cat: /data/x: Permission denied`).
In its namespaces (SPEC §17) a path outside what the run was granted is not there at all
(`No such file or directory`), and a folder it may only read is a read-only file system.
When the path it names lies outside what the run was granted, the job's error says so and
names the fix: `reads:` or `writes:` in the manifest, or a workspace. A path that is aat's
own, another process's, or that no tool may have, is named as such instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from webplatform.process.confine.fence import Fence, workspace_problem
from webplatform.registry.paths import home_problem

_REFUSED = re.compile(
    # Landlock's refusal, and a namespace's read-only view of a folder the tool may only read.
    r"permission denied|EACCES|EPERM|operation not permitted|read-only file system|EROFS",
    re.IGNORECASE,
)
# A path the namespaces hide is missing rather than refused.
_MISSING = re.compile(r"no such file or directory|ENOENT", re.IGNORECASE)
_QUOTED = re.compile(r"""['"`‘“](/[^'"`’”\n]*)['"`’”]""")
_BARE = re.compile(r"""(?<![\w/.~-])(/[^\s'"`:,;]+)""")


def hint(
    text: str, rules: dict[str, list[str]], fence: Fence, *, namespaces: bool = True
) -> str | None:
    """One clause for the job's error when `text` (the error and stderr, last line first)
    reports a refused path outside `rules` (the run's `read` and `write` lists), else None.
    `namespaces`: the run had them, so a path reported missing may have been hidden."""
    for line in reversed(text.splitlines()):
        refused = _REFUSED.search(line)
        if not refused and not (namespaces and _MISSING.search(line)):
            continue
        for path in _paths(line):
            if not refused and not (_another_process(path) or _hidden(path, rules)):
                continue  # really missing: not a matter of confinement
            found = _explain(path, rules, fence)
            if found:
                return found
    return None


def _paths(line: str) -> list[Path]:
    found = _QUOTED.findall(line) or _BARE.findall(line)
    return [Path(os.path.normpath(p)) for p in found]


def _hidden(path: Path, rules: dict[str, list[str]]) -> bool:
    """Whether a path the tool found missing was hidden by its namespaces: it lies outside
    all it was given, and it (or the folder it would be made in) is there on the host."""
    if _covered(path, [*rules["read"], *rules["write"]]):
        return False  # the tool sees that folder as the host has it
    return os.path.lexists(path) or os.path.isdir(path.parent)


def _covered(path: Path, rules: Sequence[str]) -> bool:
    real = Path(os.path.realpath(path))
    return any(p.is_relative_to(Path(os.path.realpath(r))) for r in rules for p in (path, real))


def _another_process(path: Path) -> bool:
    """A path under `/proc/<pid>`: the call's own PID namespace hides every other process."""
    parts = path.parts
    return len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit()


def _explain(path: Path, rules: dict[str, list[str]], fence: Fence) -> str | None:
    if _covered(path, rules["write"]):
        return None  # granted: refused by the file's own permissions, not by aat
    if _another_process(path):
        return (
            f"{path} belongs to another process: a tool sees only the processes of its own "
            "call (its own are under /proc/self), and no manifest can change that"
        )
    home = fence.home.expanduser().resolve()
    if home_problem(path, home=home, what=str(path)) or any(
        path.is_relative_to(s) for s in fence.secret_paths
    ):
        return f"{path} is aat's own (in AAT_HOME): no tool may read or write it"
    if _covered(path, rules["read"]):
        return (
            f"this tool may read {path} but not write it: to allow writing, add it to "
            "`writes:` in its manifest, or add a folder holding it to AAT_WORKSPACES"
        )
    where = "add a folder holding it to AAT_WORKSPACES or call from there"
    if workspace_problem(fence, path.parent) is not None:
        where = "it cannot be a workspace"
    return (
        f"{path} is outside what this tool may reach: to allow it, add it to `reads:` or "
        f"`writes:` in its manifest ({where})"
    )
