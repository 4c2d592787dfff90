"""Tools cannot reach aat (SPEC §14): real confined subprocesses, real jobs, real refusals."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import openpyxl
import pytest
from workspaces import aat_home_beside

from webplatform.config import Settings
from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.process import confine
from webplatform.process.confine import landlock, sweep
from webplatform.store.models import Surface

TESTS = Path(__file__).resolve().parent
AGENT = Actor(surface=Surface.mcp_stdio, client="test-agent")
SITE_PACKAGES = Path(openpyxl.__file__).resolve().parents[1]
USER_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)


@pytest.fixture
def platform_settings(tmp_path: Path) -> Settings:
    """The test registry (tests/tools), a SQLite database in AAT_HOME, `tmp_path` as workspace;
    beside the database, what aat keeps there: keys and settings files (stand-ins)."""
    settings = Settings(
        home=aat_home_beside(tmp_path), registry=str(TESTS), workspaces=str(tmp_path)
    )
    settings.home.mkdir(mode=0o700, parents=True)
    (settings.home / "signing.key").write_text("not-for-tools")
    (settings.home / "settings.toml").write_text("secret = 'not-for-tools'\n")
    return settings


def escape(platform: Platform, action: str, **args: str) -> Answer:
    return request_run(
        platform=platform,
        call=RunCall(kind="tool", name="escape", action=action, args=args),
        actor=AGENT,
        consent=Consent.NONE,
    )


# What the operating system answers a tool that reaches for something not its own: the path
# is not there at all in its namespaces (SPEC §17); what is there for reading only is
# read-only, and Landlock refuses it too (SPEC §14).
NOT_THERE = ("No such file or directory",)
READ_ONLY = ("Read-only file system", "Permission denied")
# A folder that is not there: reading finds nothing, and planting a file in it makes one at
# its path instead, in a folder the tool may not write (read-only, or refused by Landlock).
FOLDER_NOT_THERE = (*NOT_THERE, *READ_ONLY)


def targets(platform: Platform) -> dict[str, tuple[Path, tuple[str, ...]]]:
    home = platform.settings.home
    ssh = USER_HOME / ".ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)  # the folder must exist for the refusal to be the OS's
    return {
        "database": (home / "aat.db", NOT_THERE),
        "key": (home / "signing.key", NOT_THERE),
        "settings": (home / "settings.toml", NOT_THERE),
        "registry file": (TESTS / "tools" / "echo" / "tool.yaml", NOT_THERE),
        "AAT_HOME itself": (home, FOLDER_NOT_THERE),
        "~/.ssh": (ssh, FOLDER_NOT_THERE),
        "~/.ssh/authorized_keys": (ssh / "authorized_keys", NOT_THERE),
        "a .pth in site-packages": (SITE_PACKAGES / "aat-escape-probe.pth", READ_ONLY),
    }


@pytest.mark.parametrize("mode", ["read", "write"])
def test_a_tool_gets_the_os_refusal_for_everything_of_aats(platform: Platform, mode: str) -> None:
    for what, (asked, refusals) in targets(platform).items():
        # A folder is written by planting a new file in it.
        target = asked / "escape-probe" if mode == "write" and asked.is_dir() else asked
        existed = target.exists()
        before = target.read_bytes() if target.is_file() else None
        try:
            answer = escape(platform, "probe", target=str(asked), mode=mode)
        finally:
            if not existed and target.exists():  # only if confinement failed: clean up
                target.unlink()
        if mode == "read" and not existed:
            continue  # nothing to read: the write probe is the one that matters
        assert answer.status is Status.failed, f"{what}: {answer}"
        # The job records the operating system's refusal, not a message of the tool's own.
        assert answer.error is not None, what
        assert any(refusal in answer.error for refusal in refusals), (what, answer.error)
        assert str(asked) in answer.error, what
        assert target.exists() == existed, what
        if before is not None:
            assert target.read_bytes() == before, what


def test_reading_installed_libraries_is_allowed(platform: Platform) -> None:
    answer = escape(
        platform, "probe", target=str(SITE_PACKAGES / "openpyxl" / "__init__.py"), mode="read"
    )
    assert answer.status is Status.succeeded, answer


def test_the_payload_of_the_attack_cannot_open_the_database(platform: Platform) -> None:
    answer = escape(platform, "approve-all")
    assert answer.status is Status.failed
    assert answer.error is not None and "unable to open database file" in answer.error


def test_a_tool_writes_its_tmpdir_and_a_workspace(platform: Platform, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    answer = escape(platform, "scratch", **{"workspace-file": str(target)})
    assert answer.status is Status.succeeded, answer
    assert answer.result is not None
    assert answer.result["tmp"] == "scratch" and answer.result["workspace"] == "workspace"
    assert target.read_text() == "workspace"
    scratch = Path(answer.result["tmpdir"])
    assert sweep.settle(timeout_s=10)  # removed once the call is done, off its answer's path
    assert scratch != Path("/tmp") and not scratch.exists()  # fresh per job, removed afterwards


def test_a_folder_outside_every_workspace_is_refused(platform: Platform, tmp_path: Path) -> None:
    elsewhere = aat_home_beside(tmp_path).parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    answer = escape(platform, "scratch", **{"workspace-file": str(elsewhere / "out.txt")})
    assert answer.status is Status.failed
    assert answer.error is not None and "No such file or directory" in answer.error
    assert not (elsewhere / "out.txt").exists()


def test_a_workspace_that_contains_aat_home_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "aat-home"
    settings = Settings(home=home, registry=str(TESTS), workspaces=str(tmp_path))
    plat = Platform(settings)
    try:
        answer = escape(plat, "scratch", **{"workspace-file": str(tmp_path / "x.txt")})
    finally:
        plat.engine.dispose()
    assert answer.status is Status.failed
    assert answer.error == (
        f"workspace {tmp_path} contains AAT_HOME or aat's database ({home.resolve()}); "
        "work from a project folder, or set AAT_WORKSPACES to folders outside it"
    )
    assert not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize("folder", ["registry", "installation"])
def test_a_workspace_over_the_registry_or_the_installation_is_refused(
    tmp_path: Path, folder: str
) -> None:
    fence = confine.Fence(home=aat_home_beside(tmp_path), registry_roots=(TESTS,))
    where = TESTS / "tools" if folder == "registry" else Path(sys.prefix)
    problem = confine.workspace_problem(fence, where.resolve())
    assert problem is not None and f"workspace {where.resolve()} overlaps" in problem


def test_without_landlock_tools_are_refused_unless_the_operator_accepts(tmp_path: Path) -> None:
    settings = Settings(
        home=aat_home_beside(tmp_path),
        registry=str(TESTS),
        workspaces=str(tmp_path),
        confine_pretend_unavailable=True,
    )
    plat = Platform(settings)
    database = str(settings.home / "aat.db")
    try:
        refused = escape(plat, "scratch", **{"workspace-file": str(tmp_path / "a.txt")})
        plat.settings = settings.model_copy(update={"unconfined": "1"})
        in_namespaces = escape(plat, "probe", target=database, mode="read")
        plat.settings = plat.settings.model_copy(update={"confine_pretend_no_namespaces": True})
        accepted = escape(plat, "probe", target=database, mode="read")
    finally:
        plat.engine.dispose()
    assert refused.status is Status.failed and refused.error == confine.UNAVAILABLE
    assert not (tmp_path / "a.txt").exists()
    # Without Landlock the namespaces still keep AAT_HOME out of the tool's sight...
    assert in_namespaces.error is not None and "No such file or directory" in in_namespaces.error
    # ...and without either, the same probe reads aat's database: what the operator accepted
    # with AAT_UNCONFINED=1.
    assert accepted.status is Status.succeeded, accepted


def test_without_namespaces_tools_are_refused_unless_landlock_alone_is_accepted(
    tmp_path: Path,
) -> None:
    settings = Settings(
        home=aat_home_beside(tmp_path),
        registry=str(TESTS),
        workspaces=str(tmp_path),
        confine_pretend_no_namespaces=True,
    )
    plat = Platform(settings)
    database = str(settings.home / "aat.db")
    try:
        refused = escape(plat, "scratch", **{"workspace-file": str(tmp_path / "a.txt")})
        plat.settings = settings.model_copy(update={"unconfined": "namespaces"})
        alone = escape(plat, "probe", target=database, mode="read")
        works = escape(plat, "scratch", **{"workspace-file": str(tmp_path / "b.txt")})
    finally:
        plat.engine.dispose()
    assert refused.status is Status.failed
    assert refused.error == confine.NO_NAMESPACES.format(
        why="AAT_CONFINE_PRETEND_NO_NAMESPACES is set"
    )
    assert not (tmp_path / "a.txt").exists()
    # With Landlock alone (AAT_UNCONFINED=namespaces), aat's database is there to see, and
    # Landlock refuses it.
    assert alone.error is not None and "Permission denied" in alone.error, alone
    assert works.status is Status.succeeded, works


def test_a_child_the_kernel_will_not_confine_never_runs_the_tool(tmp_path: Path) -> None:
    """A refused confinement means no run at all, never an unconfined one: here the
    descriptor handed to the child is no Landlock ruleset, so the kernel refuses it."""
    marker = tmp_path / "ran"
    not_a_ruleset = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        done = subprocess.run(
            ["touch", str(marker)],
            capture_output=True,
            text=True,
            check=False,
            preexec_fn=landlock.confiner(not_a_ruleset),
        )
    finally:
        os.close(not_a_ruleset)
    assert done.returncode == landlock.EXIT_NOT_CONFINED
    assert done.stderr.startswith("aat: the tool was not run: confinement failed (")
    assert not marker.exists()
