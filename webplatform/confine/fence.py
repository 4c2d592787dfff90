"""The fence: what every tool run is kept away from, and the folders it may work in (SPEC §14)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import make_url

from webplatform.config import UNCONFINED_ALL, UNCONFINED_NAMESPACES, Settings
from webplatform.registry.paths import INSTALLATION, interpreter_prefixes, overlaps


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
        found = [_real(self.home)]
        if self.database is not None:
            found.append(_real(self.database))
        return found


def _real(path: Path) -> Path:
    return path.expanduser().resolve()


def workspaces_for(fence: Fence, caller_cwd: Path | None) -> list[Path] | str:
    """The call's workspaces: `AAT_WORKSPACES` plus the caller's folder; or a one-line refusal."""
    found: list[Path] = []
    for raw in fence.workspaces:
        path = Path(raw).expanduser()
        if not path.is_absolute():
            return f"AAT_WORKSPACES entry {raw!r} is not an absolute path; write it out in full"
        if not path.is_dir():
            return f"AAT_WORKSPACES entry {raw!r} is not a folder; create it or remove it"
        found.append(path.resolve())
    if caller_cwd is not None:
        found.append(caller_cwd.resolve())
    for path in found:
        problem = workspace_problem(fence, path)
        if problem:
            return problem
    return list(dict.fromkeys(found))


def workspace_problem(fence: Fence, path: Path) -> str | None:
    """Why `path` cannot be a workspace (it holds or is held by something of aat's), or None."""
    fix = "work from a project folder, or set AAT_WORKSPACES to folders outside it"
    for secret in fence.secret_paths:
        if overlaps(path, secret):
            return f"workspace {path} contains AAT_HOME or aat's database ({secret}); {fix}"
    for root in fence.registry_roots:
        if overlaps(path, _real(root)):
            return f"workspace {path} overlaps the registry folder {_real(root)}; {fix}"
    for installed in (INSTALLATION, *interpreter_prefixes()):
        if overlaps(path, installed):
            return f"workspace {path} overlaps aat's installation ({installed}); {fix}"
    user_home = Path("~").expanduser().resolve()
    if user_home.is_relative_to(path):
        return f"workspace {path} contains your home folder ({user_home}); {fix}"
    return None
