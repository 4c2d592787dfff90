"""A jail for one tool run: its scratch folder, its paths, its network, what confines the child.

The rules become a Landlock ruleset in aat's own process (every path opened and checked
there); the spawned child, between fork and exec, only enforces it with two system calls
through function pointers resolved beforehand (`landlock.confiner`). The server process is
multi-threaded, which is why the child does nothing else there: no Python import, no dlopen,
no lock another thread could have held at fork. A separate launcher interpreter per call,
as before, cost about 20 ms a call for the same rules.

Where the kernel lets it, a run also gets namespaces of its own (SPEC §17): `view()` is what
a zygote's namespaces hold for every call, `request()` what a call's child binds and enforces
on top. `network: none` runs in a network of its own; declared ports or `any`, in the host's.
Where namespaces are missing, tools are refused unless the operator accepted Landlock alone
(`AAT_UNCONFINED=namespaces`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from webplatform.process.confine import landlock, namespaces, sweep
from webplatform.process.confine.fence import Fence, NotStarted, workspaces_for
from webplatform.process.confine.landlock import Net
from webplatform.registry.model import ToolLimits, ToolSpec
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
NO_WRITES_UNAVAILABLE = (
    "not run: a preview runs only where it cannot write, and this kernel has no Landlock "
    "to stop it (needs Linux 5.13+ with Landlock enabled)"
)
NO_NAMESPACES = (
    "tools are not run: this system cannot give them namespaces of their own ({why}); allow "
    "unprivileged user namespaces (sysctl user.max_user_namespaces, and on Ubuntu "
    "kernel.apparmor_restrict_unprivileged_userns=0), or to run them with Landlock alone, the "
    "operator sets AAT_UNCONFINED=namespaces"
)
NAMESPACES_PY = Path(namespaces.__file__).resolve()


@dataclass
class Jail:
    """How one run is confined: what it may read and write, how, and its scratch folder.

    `paths` (`{"read": [...], "write": [...]}`) is what the tool may reach, None when it runs
    unconfined (as the operator accepted). `landlock` says Landlock enforces `paths`, and
    `net` its TCP rules (`{"connect": [...], "bind": [...]}`; None: TCP left alone).
    `netns` is the network of the namespaces the tool runs in: `own` (no network but its
    loopback) or `host`; None when it runs without namespaces. `note` says why the caller's
    folder is not among its workspaces (see `workspaces_for`). `limits` is what the call may
    use (SPEC §20), held by the call's child (see zygote.py). Use it as a context manager:
    leaving it removes the scratch folder (and the ruleset).
    """

    scratch: Path
    env: dict[str, str] = field(default_factory=dict)
    paths: dict[str, list[str]] | None = None
    landlock: bool = False
    net: Net | None = None
    netns: str | None = None
    note: str | None = None
    limits: ToolLimits = field(default_factory=ToolLimits)
    _ruleset: int | None = None

    def request(self) -> dict[str, Any]:
        """What a zygote's child needs to confine the call (see zygote.py): `paths` for
        Landlock, `own` (the call's own paths, past the static view) for its namespaces."""
        own = None
        if self.paths is not None:
            static = _static_paths()
            own = {key: [p for p in paths if p not in static] for key, paths in self.paths.items()}
        limits = {**dataclasses.asdict(self.limits), "scratch": str(self.scratch)}
        return {
            "paths": self.paths,
            "own": own,
            "landlock": self.landlock,
            "net": self.net,
            "limits": limits,
        }

    def view(self, *reads: Path) -> dict[str, Any] | None:
        """The static view a zygote's namespaces hold for every call (None: no namespaces):
        the system and interpreter paths, and `reads` (a warm tool's own folder)."""
        if self.netns is None:
            return None
        return {
            "net": self.netns,
            "read": [*SYSTEM_READS, *_interpreter_reads(), *(str(p) for p in reads)],
            "write": list(DEVICE_WRITES),
        }

    def preexec(self) -> Callable[[], None] | None:
        """What the child runs between fork and exec to confine itself (None: no Landlock).

        Builds the Landlock ruleset here, in the parent; raises OSError when the kernel
        refuses a rule, and then the tool must not run.
        """
        if not self.landlock or self.paths is None:
            return None
        read, write = self.paths["read"], self.paths["write"]
        if self._ruleset is None:
            self._ruleset = landlock.ruleset(read, write, net=self.net)
        return landlock.confiner(self._ruleset, read, write)

    def __enter__(self) -> Jail:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._ruleset is not None:
            os.close(self._ruleset)
            self._ruleset = None
        sweep.remove_later(self.scratch)  # the call's answer need not wait for it


def available(fence: Fence) -> bool:
    """Whether tools can be confined by Landlock here."""
    return not fence.pretend_unavailable and landlock.abi_version() >= 1


def namespaces_problem(fence: Fence) -> str | None:
    """None when tools can run in namespaces of their own here; else why not (a few words)."""
    if fence.pretend_no_namespaces:
        return "AAT_CONFINE_PRETEND_NO_NAMESPACES is set"
    return _probe()


@functools.cache
def _probe() -> str | None:
    """Enter the namespaces once in a throwaway process (this one must stay as it is)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"):
        return f"not supported on {sys.platform}"
    try:
        done = subprocess.run(
            [sys.executable, "-S", str(NAMESPACES_PY)],
            capture_output=True,
            timeout=30,
            check=False,
            env={"PATH": "/usr/bin:/bin"},
        )
        problem = json.loads(done.stdout or b"{}").get("problem", "the probe failed")
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        problem = f"the probe failed: {exc}"
    return None if problem is None else str(problem)


def startup_note(fence: Fence) -> str | None:
    """One line for aat's start when tools cannot run fully confined here; None when they can.

    Starts a short-lived process (the namespaces probe) the first time.
    """
    problem = namespaces_problem(fence)
    if not available(fence):
        if fence.unconfined:
            return "this kernel has no Landlock: tools run unconfined, as AAT_UNCONFINED=1 accepts"
        return UNAVAILABLE
    if problem is None:
        return None
    if fence.unconfined or fence.landlock_alone:
        return (
            f"tools run without namespaces of their own ({problem}), with Landlock alone, as "
            f"AAT_UNCONFINED={'1' if fence.unconfined else 'namespaces'} accepts"
        )
    return NO_NAMESPACES.format(why=problem)


def lock(tool: ToolSpec, fence: Fence, caller_cwd: Path | None) -> Jail:
    """The jail for one run of `tool`; raises `NotStarted` (a one-line reason) when it must
    not run at all."""
    confined = available(fence)
    if not confined and (fence.no_writes or not fence.unconfined):
        raise NotStarted(NO_WRITES_UNAVAILABLE if fence.no_writes else UNAVAILABLE)
    problem = namespaces_problem(fence)
    if problem is not None and not (fence.unconfined or fence.landlock_alone):
        raise NotStarted(NO_NAMESPACES.format(why=problem))
    net = _tcp_rules(tool, confined)
    workspaces = workspaces_for(fence, caller_cwd)
    reads, writes = _declared(tool, fence)
    writable = workspaces.paths
    if fence.no_writes:
        reads, writes, writable = [*reads, *writes, *writable], [], []
    scratch = Path(tempfile.mkdtemp(prefix=f"aat-{tool.name}-")).resolve()
    # Tools learn their workspaces so they can say where they may write before they try.
    env = {"TMPDIR": str(scratch), "AAT_WORKSPACES": ":".join(str(w) for w in writable)}
    # `network: none` runs in a network of its own; any other reach, in the host's.
    netns = None if problem else "own" if tool.network.none else "host"
    jail = Jail(scratch, env=env, landlock=confined, net=net, netns=netns, note=workspaces.note)
    jail.limits = tool.limits
    if confined or netns:
        jail.paths = _paths(tool, scratch, writable, reads, writes)
        exposed = _exposed(jail.paths, fence)
        if exposed:
            jail.__exit__(None, None, None)
            raise NotStarted(exposed)
    return jail


def _paths(
    tool: ToolSpec, scratch: Path, workspaces: list[Path], reads: list[Path], writes: list[Path]
) -> dict[str, list[str]]:
    """What one run may read and write; its own paths resolved, as the namespaces bind them."""
    return {
        "read": [
            *SYSTEM_READS,
            *_interpreter_reads(),
            str(tool.folder.resolve()),
            *(str(p.resolve()) for p in reads),
        ],
        "write": [
            str(scratch),
            *(str(p.resolve()) for p in [*workspaces, *writes]),
            *DEVICE_WRITES,
        ],
    }


def _tcp_rules(tool: ToolSpec, confined: bool) -> Net | None:
    """Landlock's TCP rules for the tool's `network:` (None: TCP left alone); raises
    `NotStarted` when this kernel cannot enforce them."""
    reach = tool.network
    if reach.any or not confined:
        return None
    abi = landlock.abi_version()
    if reach.none:  # a second wall behind the network namespace, where the kernel has one
        return {"connect": [], "bind": []} if abi >= landlock.NET_ABI else None
    if abi < landlock.NET_ABI:
        raise NotStarted(
            f"{tool.name} declares `network: {reach}`, which needs Landlock's TCP rules "
            f"(Linux 6.7+, ABI {landlock.NET_ABI}; this kernel has ABI {abi}); to let it "
            "reach any port, declare `network: any`"
        )
    return {"connect": list(reach.connect), "bind": list(reach.bind)}


def _exposed(rules: dict[str, list[str]], fence: Fence) -> str | None:
    """A last check that no rule reaches aat's own state (say, AAT_HOME under /opt)."""
    secrets = [(secret, str(secret)) for secret in fence.secret_paths]
    fixed = _fixed_rules()
    for rule in (*rules["read"], *rules["write"]):
        path = fixed.get(rule) or os.path.realpath(rule)
        folder = path.rstrip("/") + "/"  # resolved paths: a prefix test is exact
        for secret, text in secrets:
            if text == path or text.startswith(folder):
                return (
                    f"aat's own state ({secret}) lies inside {path}, which tools may read; "
                    "move AAT_HOME (and the database) to a folder of its own"
                )
    return None


@functools.cache
def _fixed_rules() -> dict[str, str]:
    """The rules every run has (system and interpreter paths), resolved once per process."""
    fixed = [*SYSTEM_READS, *DEVICE_WRITES, *(str(p) for p in interpreter_prefixes())]
    return {rule: os.path.realpath(rule) for rule in fixed}


@functools.cache
def _static_paths() -> frozenset[str]:
    """The paths every call has, which a zygote's namespaces hold from their start."""
    return frozenset((*SYSTEM_READS, *DEVICE_WRITES, *_interpreter_reads()))


@functools.cache
def _interpreter_reads() -> tuple[str, ...]:
    return (
        *(str(p) for p in interpreter_prefixes()),
        str(Path(sys.executable).resolve().parent),
    )


def _declared(tool: ToolSpec, fence: Fence) -> tuple[list[Path], list[Path]]:
    """The manifest's `reads:` and `writes:`, expanded and checked against this host's fence
    (`NotStarted` when one may not be granted)."""
    home = fence.home.expanduser().resolve()
    reads: list[Path] = []
    writes: list[Path] = []
    for raws, into in ((tool.reads, reads), (tool.writes, writes)):
        key = "writes" if into is writes else "reads"
        for raw in raws:
            try:
                path = expand(raw, home=home)
            except ValueError as exc:
                raise NotStarted(f"{tool.name}: `{key}`: {exc}") from exc
            problem = _declared_problem(path, key, raw, fence, home)
            if problem:
                raise NotStarted(f"{tool.name}: {problem}; fix {tool.manifest_path.name}")
            if key == "writes" and not path.exists() and not fence.no_writes:
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
