"""The fence: what every tool run is kept away from, and the folders it may work in (SPEC §14)."""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import make_url

from webplatform.config import UNCONFINED_ALL, UNCONFINED_NAMESPACES, Settings
from webplatform.registry.paths import INSTALLATION, interpreter_prefixes, overlaps, within


class NotStarted(Exception):
    """Why a tool's process must not, or could not, be started: one line for the caller,
    saying what is wrong and how to fix it (the runner answers it as a failed run)."""


@dataclass(frozen=True)
class Fence:
    """aat's own state, the registry folders and the operator's workspaces, for the runner.

    `unconfined` is the operator's `AAT_UNCONFINED=1`: where Landlock (or namespaces) are
    missing, tools run anyway. `landlock_alone` is `AAT_UNCONFINED=namespaces`: where
    namespaces are missing, tools run with Landlock alone. `pretend_unavailable`
    (`AAT_CONFINE_PRETEND_UNAVAILABLE=1`) behaves as if the kernel had no Landlock, and
    `pretend_no_namespaces` (`AAT_CONFINE_PRETEND_NO_NAMESPACES=1`) as if it could make no
    namespaces; they exist only so those refusals can be tested on a kernel that has both.
    """

    home: Path
    registry_roots: tuple[Path, ...] = ()
    workspaces: tuple[str, ...] = ()
    database: Path | None = None
    unconfined: bool = False
    landlock_alone: bool = False
    pretend_unavailable: bool = False
    pretend_no_namespaces: bool = False
    # A preview (SPEC §16): the tool writes nothing but its scratch folder; what it could
    # write otherwise (`writes:`, workspaces) it may only read; and it runs confined or not
    # at all, whatever `unconfined` says.
    no_writes: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Fence:
        """The fence for this host's settings."""
        database = None
        url = make_url(settings.database_url)
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            database = Path(url.database or "").expanduser()
        return cls(
            home=settings.home,
            registry_roots=tuple(settings.registry_roots),
            workspaces=tuple(w for w in settings.workspaces.split(":") if w.strip()),
            database=database,
            unconfined=settings.unconfined == UNCONFINED_ALL,
            landlock_alone=settings.unconfined == UNCONFINED_NAMESPACES,
            pretend_unavailable=settings.confine_pretend_unavailable,
            pretend_no_namespaces=settings.confine_pretend_no_namespaces,
        )

    @property
    def secret_paths(self) -> list[Path]:
        """What no tool may read or write: AAT_HOME and the database file."""
        return list(_secret_paths(self.home, self.database))


@functools.lru_cache(maxsize=16)
def _secret_paths(home: Path, database: Path | None) -> tuple[Path, ...]:
    """AAT_HOME and the database file, resolved once per process: every call checks its
    rules against them, and aat's own folders do not move while it runs (nothing a tool
    may write holds them, see `workspace_problem`)."""
    return (_real(home), *([] if database is None else [_real(database)]))


@functools.lru_cache(maxsize=16)
def _resolved(roots: tuple[Path, ...]) -> tuple[Path, ...]:
    """The registry folders, resolved once per process (as `_secret_paths`)."""
    return tuple(_real(root) for root in roots)


def _real(path: Path) -> Path:
    return path.expanduser().resolve()


# Folders of the system: never a workspace, nor anything in them (a tool that may write a
# workspace could change /etc/cron.d or /var/lib), nor a folder that holds one of them.
SYSTEM_FOLDERS = tuple(
    Path(p)
    for p in (
        "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot",
        "/dev", "/proc", "/sys", "/run", "/var", "/snap",
    )
)  # fmt: skip
# Folders that hold other people's or programs' folders: never a workspace themselves, but a
# project inside one is (`/home/alice/project`, `/var/tmp/build`).
HOLDERS = tuple(Path(p) for p in ("/home", "/root", "/tmp", "/var/tmp", "/srv", "/mnt", "/media"))
_FIX = "work from a project folder, or set AAT_WORKSPACES to folders outside it"


@dataclass(frozen=True)
class Workspaces:
    """The folders a call may work in, and why the caller's own folder is not among them
    (`note`, one line for the caller; None when it is, or when there is none)."""

    paths: list[Path]
    note: str | None = None


def workspaces_for(fence: Fence, caller_cwd: Path | None) -> Workspaces:
    """The call's workspaces: `AAT_WORKSPACES` plus the caller's folder; raises `NotStarted`.

    An `AAT_WORKSPACES` entry that cannot be a workspace refuses the call (the operator must
    fix it); a caller's folder that cannot be one is left out, and the note says why.
    """
    found: list[Path] = []
    for raw in fence.workspaces:
        path = Path(raw).expanduser()
        if not path.is_absolute():
            raise NotStarted(
                f"AAT_WORKSPACES entry {raw!r} is not an absolute path; write it out in full"
            )
        if not path.is_dir():
            raise NotStarted(
                f"AAT_WORKSPACES entry {raw!r} is not a folder; create it or remove it"
            )
        found.append(path.resolve())
    for path in found:
        problem = workspace_problem(fence, path)
        if problem:
            raise NotStarted(problem)
    note = None
    if caller_cwd is not None:
        caller = caller_cwd.resolve()
        problem = workspace_problem(fence, caller)
        if problem is None:
            found.append(caller)
        else:
            note = f"your folder was not offered to the tool: {problem}"
    return Workspaces(list(dict.fromkeys(found)), note)


def workspace_problem(fence: Fence, path: Path) -> str | None:
    """Why `path` cannot be a workspace (it holds or is held by something of aat's, the
    system's or the home folder's settings), or None."""
    for secret in fence.secret_paths:
        if overlaps(path, secret):
            return f"workspace {path} contains AAT_HOME or aat's database ({secret}); {_FIX}"
    for root in _resolved(fence.registry_roots):
        if overlaps(path, root):
            return f"workspace {path} overlaps the registry folder {root}; {_FIX}"
    for installed in (INSTALLATION, *interpreter_prefixes()):
        if overlaps(path, installed):
            return f"workspace {path} overlaps aat's installation ({installed}); {_FIX}"
    return _home_problem(path) or _system_problem(path)


def _home_problem(path: Path) -> str | None:
    """The home folder, a folder holding it, or one of its dot-folders (~/.ssh, ~/.config)."""
    for home in user_homes():
        if home.is_relative_to(path):
            return f"workspace {path} contains your home folder ({home}); {_FIX}"
        if path.is_relative_to(home) and path != home:
            first = path.relative_to(home).parts[0]
            if first.startswith("."):
                return (
                    f"workspace {path} is in {home / first}, a settings folder of your home "
                    f"(keys and credentials live in dot-folders); {_FIX}"
                )
    return None


def _system_problem(path: Path) -> str | None:
    """A system folder, a folder holding one or a folder of many users, or a path in a
    system folder that is not a project in one of those (`/var/tmp/build` is fine)."""
    # As text (see `within`): these comparisons cost more than the rest of a call's checks.
    text = str(path)
    for system in SYSTEM_FOLDERS:
        if within(str(system), text):
            return f"workspace {path} is or holds the system folder {system}; {_FIX}"
    for holder in HOLDERS:
        if within(str(holder), text):
            return f"workspace {path} is or holds {holder}, a folder of many users; {_FIX}"
    if any(within(text, str(holder)) for holder in HOLDERS):
        return None
    for system in SYSTEM_FOLDERS:
        if within(text, str(system)):
            return f"workspace {path} is in the system folder {system}; {_FIX}"
    return None


def user_homes() -> list[Path]:
    """The home folder: HOME of aat's environment and the user's from the password database."""
    return list(_user_homes(os.environ.get("HOME"), os.getuid()))


@functools.lru_cache(maxsize=4)
def _user_homes(home: str | None, uid: int) -> tuple[Path, ...]:
    """`user_homes` for this HOME and user, looked up and resolved once per process."""
    del home  # the cache's key: `expanduser` reads it from the environment
    found = [Path("~").expanduser()]
    with contextlib.suppress(KeyError):
        found.append(Path(pwd.getpwuid(uid).pw_dir))
    return tuple(dict.fromkeys(_real(h) for h in found))
