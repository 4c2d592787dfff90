"""A cgroup (v1 `pids` and `memory`) around the processes a limits test starts, so that a
limit that does not hold cannot take the machine down with the test.

The product holds its limits without cgroups (SPEC §20); this is the tests' own safety net.
Where the v1 hierarchies are not mounted they are mounted under a folder of the test's; where
this process may not make cgroups at all (not root, no v1 controllers), `guard` says so and
the test runs without the net (the limits under test are what hold it then).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

V1 = Path("/sys/fs/cgroup")
# Enough for a test and the `aat serve` it starts; a fork bomb or a balloon stops here.
PIDS_MAX = 1500
MEMORY_MAX = 6 << 30


@dataclass
class Guard:
    """The cgroups made (empty when none could be): `add(pid)` puts a process in them."""

    groups: list[Path]
    why_not: str | None = None

    def add(self, pid: int) -> None:
        for group in self.groups:
            (group / "cgroup.procs").write_text(str(pid))


def _hierarchy(controller: str, spare: Path) -> Path:
    mounted = V1 / controller
    if (mounted / "cgroup.procs").exists():
        return mounted
    target = spare / controller
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "cgroup", "-o", controller, "none", str(target)], check=True)
    return target


@contextlib.contextmanager
def guard(spare: Path) -> Iterator[Guard]:
    """Cgroups with a pids and a memory limit for the duration; every process put in them
    is moved back to its hierarchy's root when it ends, and they are removed."""
    name = f"aat-limits-test-{uuid.uuid4().hex[:8]}"
    groups: list[Path] = []
    mounts: list[Path] = []
    try:
        for controller, knob, value in (
            ("pids", "pids.max", PIDS_MAX),
            ("memory", "memory.limit_in_bytes", MEMORY_MAX),
        ):
            root = _hierarchy(controller, spare)
            if not str(root).startswith(str(V1)):
                mounts.append(root)
            group = root / name
            group.mkdir()
            groups.append(group)
            (group / knob).write_text(str(value))
    except (OSError, subprocess.CalledProcessError) as exc:
        _remove(groups, mounts)
        yield Guard([], why_not=f"no cgroup v1 safety net here ({exc})")
        return
    try:
        yield Guard(groups)
    finally:
        _remove(groups, mounts)


def _remove(groups: list[Path], mounts: list[Path]) -> None:
    for group in groups:
        with contextlib.suppress(OSError):
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (group.parent / "cgroup.procs").write_text(pid)
        with contextlib.suppress(OSError):
            os.rmdir(group)
    for mount in mounts:
        subprocess.run(["umount", str(mount)], check=False)


def tagged_pids(tag: str) -> list[int]:
    """Host pids whose command line carries `tag` (a test's own marker on its tools)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if tag.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
    return found
