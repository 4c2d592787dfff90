"""Which folders may be workspaces (SPEC §17, §19), what a call from a folder that may not be
one gets, and what a tool refused a path outside its confinement is told."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from workspaces import aat_home_beside

from webplatform.config import Settings
from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Actor, Platform
from webplatform.process import confine
from webplatform.store.models import Surface

TESTS = Path(__file__).resolve().parent
USER_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir).resolve()

NEVER = [
    "/",
    "/etc",
    "/etc/ssh",
    "/usr",
    "/usr/lib",
    "/var",
    "/var/lib",
    "/var/lib/postgresql",
    "/home",
    "/bin",
    "/boot",
    "/dev",
    "/proc",
    "/proc/1",
    "/sys",
    "/run",
    "/run/user/1000",
    "/root",
    "/tmp",
    "/var/tmp",
    "~/.ssh",
    "~/.config",
    "~/.config/gcloud",
    "~/.gnupg",
    "~",
]
FINE = ["/tmp/project", "/var/tmp/build", "/home/someone/project", "/srv/site", "~/project"]


def _fence(tmp_path: Path) -> confine.Fence:
    return confine.Fence(home=aat_home_beside(tmp_path), registry_roots=(TESTS,))


def _path(raw: str) -> Path:
    return Path(raw.replace("~", str(USER_HOME), 1))


@pytest.mark.parametrize("folder", NEVER)
def test_system_folders_and_the_homes_dot_folders_are_never_workspaces(
    tmp_path: Path, folder: str
) -> None:
    path = _path(folder)
    problem = confine.workspace_problem(_fence(tmp_path), path)
    assert problem is not None and problem.startswith(f"workspace {path} ")
    assert problem.endswith(
        "; work from a project folder, or set AAT_WORKSPACES to folders outside it"
    )


@pytest.mark.parametrize("folder", FINE)
def test_project_folders_are_workspaces(tmp_path: Path, folder: str) -> None:
    assert confine.workspace_problem(_fence(tmp_path), _path(folder)) is None


@pytest.fixture
def platform_settings(tmp_path: Path) -> Settings:
    """The test tools on SQLite, with no workspace setting: the rules under test decide."""
    return Settings(home=aat_home_beside(tmp_path), registry=str(TESTS))


def _run(platform: Platform, cwd: Path, name: str, action: str, **args: str) -> Answer:
    return request_run(
        platform=platform,
        call=RunCall(kind="tool", name=name, action=action, args=args),
        actor=Actor(surface=Surface.mcp_stdio, client="test-agent", cwd=cwd),
        consent=Consent.NONE,
    )


@pytest.mark.parametrize("where", ["home", "AAT_HOME", "~/.ssh"])
def test_a_call_from_a_folder_that_cannot_be_a_workspace_runs_without_it(
    platform: Platform, where: str
) -> None:
    cwd = {"home": USER_HOME, "AAT_HOME": platform.settings.home, "~/.ssh": USER_HOME / ".ssh"}
    folder = cwd[where]
    folder.mkdir(mode=0o700, exist_ok=True)
    answer = _run(platform, folder, "echo", "echo")
    assert answer.status is Status.succeeded, answer
    assert answer.note is not None
    assert answer.note.startswith(f"your folder was not offered to the tool: workspace {folder}")
    env = answer.result["env"]  # type: ignore[index]
    assert "AAT_CALLER_CWD" not in env and str(folder) not in env["AAT_WORKSPACES"].split(":")
    # job_status says the same later.
    assert answer.job is not None
    later = job_answer(platform=platform, job_id=answer.job)
    assert later.note == answer.note and later.to_dict()["note"] == answer.note


def test_a_call_from_a_project_folder_has_it_and_no_note(
    platform: Platform, tmp_path: Path
) -> None:
    answer = _run(platform, tmp_path, "echo", "echo")
    assert answer.status is Status.succeeded, answer
    assert answer.note is None and "note" not in answer.to_dict()
    assert answer.result["env"]["AAT_CALLER_CWD"] == str(tmp_path)  # type: ignore[index]


# What the operating system tells a tool refused a path: in its namespaces (SPEC §17) what
# it was not given is not there and what it may only read is a read-only file system; with
# Landlock alone (AAT_UNCONFINED=namespaces, where namespaces are missing) both are refused.
CONFINEMENTS = {
    "namespaces": ({}, "No such file or directory", "Read-only file system"),
    "landlock-alone": (
        {"unconfined": "namespaces", "confine_pretend_no_namespaces": True},
        "Permission denied",
        "Permission denied",
    ),
}


@pytest.fixture(params=list(CONFINEMENTS))
def confined(request: pytest.FixtureRequest, platform: Platform) -> tuple[Platform, str, str]:
    """`platform` confining tools one way, and what the OS says of a path outside what a
    tool was given and of one it may only read."""
    update, outside, read_only = CONFINEMENTS[request.param]
    platform.settings = platform.settings.model_copy(update=update)
    return platform, outside, read_only


def test_a_refused_path_outside_the_confinement_is_named_with_the_fix(
    confined: tuple[Platform, str, str], tmp_path: Path
) -> None:
    platform, outside, _ = confined
    elsewhere = aat_home_beside(tmp_path).parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "out.txt"
    answer = _run(platform, tmp_path, "escape", "probe", target=str(target), mode="write")
    assert answer.status is Status.failed
    assert answer.error == (
        f"exit 1: write {target}: {outside}; {target} is outside what this tool may "
        "reach: to allow it, add it to `reads:` or `writes:` in its manifest (add a folder "
        "holding it to AAT_WORKSPACES or call from there)"
    )


def test_a_refused_path_of_aats_own_is_named_as_such(
    confined: tuple[Platform, str, str], tmp_path: Path
) -> None:
    platform, outside, _ = confined
    target = platform.settings.home / "aat.db"
    answer = _run(platform, tmp_path, "escape", "probe", target=str(target), mode="read")
    assert answer.status is Status.failed
    assert answer.error == (
        f"exit 1: read {target}: {outside}; {target} is aat's own (in AAT_HOME): no tool may "
        "read or write it"
    )


def test_a_refused_path_the_tool_may_only_read_says_how_to_allow_writing(
    confined: tuple[Platform, str, str], tmp_path: Path
) -> None:
    platform, _, read_only = confined
    target = TESTS / "tools" / "escape" / "tool.yaml"  # its own folder: read, never written
    answer = _run(platform, tmp_path, "escape", "probe", target=str(target), mode="write")
    assert answer.status is Status.failed
    assert answer.error == (
        f"exit 1: write {target}: {read_only}; this tool may read {target} but not write it: "
        "to allow writing, add it to `writes:` in its manifest, or add a folder holding it to "
        "AAT_WORKSPACES"
    )


def test_a_file_really_missing_where_the_tool_may_look_gets_no_hint(
    platform: Platform, tmp_path: Path
) -> None:
    """In its namespaces a missing path is explained only when they hid it: one in the
    tool's own folder, which it sees as the host has it, is just missing."""
    target = TESTS / "tools" / "escape" / "no-such-file"
    answer = _run(platform, tmp_path, "escape", "probe", target=str(target), mode="read")
    assert answer.error == f"exit 1: read {target}: No such file or directory"


def test_a_refused_path_of_another_process_names_no_manifest_fix(
    platform: Platform, tmp_path: Path
) -> None:
    """Another process's /proc entry is hidden by the call's own PID namespace: the hint says
    so, rather than offering `reads:` for something no manifest can grant."""
    target = Path(f"/proc/{os.getpid()}/status")
    answer = _run(platform, tmp_path, "escape", "probe", target=str(target), mode="read")
    assert answer.status is Status.failed
    assert answer.error == (
        f"exit 1: read {target}: No such file or directory; {target} belongs to another "
        "process: a tool sees only the processes of its own call (its own are under "
        "/proc/self), and no manifest can change that"
    )
