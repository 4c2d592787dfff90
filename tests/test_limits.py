"""A tool cannot take aat down (SPEC §20): real fork bombs, balloons, disk fillers, descriptor
leaks and orphans, each in a plain call and a warm one, each stopped by its own limit and
named in the call's error.

The test process (and so the spawner's zygotes it starts) sits in a cgroup with a pids and a
memory limit (`cgroup_guard`), so that a limit that does not hold fails the test instead of
harming the machine. Every tool action stops on its own (a deadline, a bounded amount): with
its limit switched off the call succeeds, or times out, and the test fails.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cgroup_guard import guard, tagged_pids

from webplatform.process import confine, runner, spawner
from webplatform.process.limits import explain, hit
from webplatform.process.outcome import RunResult
from webplatform.registry import RegistryLoader
from webplatform.registry.model import ToolLimits, ToolSpec

TESTS = Path(__file__).resolve().parent
TOOLS = TESTS / "tools"
CEILINGS = "limits.{key} in its manifest; ceiling {setting}"


@pytest.fixture(scope="module", autouse=True)
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """This process and the zygotes it starts from now on, in the cgroup safety net."""
    spawner.shutdown()  # zygotes started before stay outside it: start new ones inside
    with guard(tmp_path_factory.mktemp("cgroups")) as g:
        g.add(os.getpid())
        try:
            yield
        finally:
            spawner.shutdown()


@pytest.fixture(scope="module")
def hog() -> ToolSpec:
    registry = RegistryLoader([TESTS]).load()
    assert "hog" in registry.tools, [e for e in registry.errors if e.name == "hog"]
    return registry.tools["hog"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def run(tool: ToolSpec, action: str, home: Path, *, warm: bool, **args: Any) -> RunResult:
    tool = replace(tool, warm=warm)
    spec = tool.action(action)
    assert spec is not None
    fence = confine.Fence(home=home, registry_roots=(TESTS,))
    return runner.run(runner.ToolCall(tool, spec, args, home=home, fence=fence))


def named(key: str, setting: str) -> str:
    return CEILINGS.format(key=key, setting=setting)


WARM = pytest.mark.parametrize("warm", [False, True], ids=["plain", "warm"])


@WARM
def test_a_fork_bomb_ends_the_call_naming_the_process_limit(
    hog: ToolSpec, home: Path, warm: bool
) -> None:
    started = time.monotonic()
    res = run(hog, "fork-bomb", home, warm=warm)
    took = time.monotonic() - started
    assert res.outcome == "failed", res
    assert res.error == (
        "the tool hit its limit of 16 processes and threads "
        f"({named('processes', 'AAT_MAX_PROCESSES')}), and was stopped"
    )
    assert took < 10, f"the bomb ran {took:.1f} s"  # (it stops itself after 15 s)


@WARM
def test_threads_within_the_process_limit_run(hog: ToolSpec, home: Path, warm: bool) -> None:
    res = run(hog, "threads", home, warm=warm)
    assert res.outcome == "succeeded", res.error
    assert res.result == {"threads": 8}


@WARM
def test_a_2_gb_allocation_fails_naming_the_memory_limit(
    hog: ToolSpec, home: Path, warm: bool
) -> None:
    res = run(hog, "balloon", home, warm=warm)
    assert res.outcome == "failed", res
    assert res.error is not None and "MemoryError" in res.error
    assert res.error.endswith(
        f"the tool hit its limit of 256 MB of memory ({named('memory_mb', 'AAT_MAX_MEMORY_MB')})"
    )


@WARM
def test_a_file_past_its_size_fails_naming_the_file_limit(
    hog: ToolSpec, home: Path, warm: bool
) -> None:
    res = run(hog, "big-file", home, warm=warm)
    assert res.outcome == "failed", res
    assert res.error is not None and "File too large" in res.error
    assert res.error.endswith(
        f"the tool hit its limit of 8 MB per file ({named('file_mb', 'AAT_MAX_FILE_MB')})"
    )


@WARM
def test_a_disk_filler_fails_when_its_scratch_folder_is_full(
    hog: ToolSpec, home: Path, warm: bool
) -> None:
    res = run(hog, "fill-scratch", home, warm=warm)
    assert res.outcome == "failed", res
    assert res.error is not None and "No space left on device" in res.error
    assert res.error.endswith(
        "the tool filled its scratch folder (TMPDIR), which holds 8 MB "
        f"({named('file_mb', 'AAT_MAX_FILE_MB')})"
    )


@WARM
def test_a_descriptor_leak_fails_naming_the_open_files_limit(
    hog: ToolSpec, home: Path, warm: bool
) -> None:
    res = run(hog, "fd-leak", home, warm=warm)
    assert res.outcome == "failed", res
    assert res.error is not None and "Too many open files" in res.error
    assert res.error.endswith(
        f"the tool hit its limit of 64 open files ({named('open_files', 'AAT_MAX_OPEN_FILES')})"
    )


@WARM
def test_a_child_left_behind_does_not_outlive_the_call(
    hog: ToolSpec, home: Path, warm: bool
) -> None:
    tag = f"aat-orphan-{uuid.uuid4().hex}"
    res = run(hog, "orphan", home, warm=warm, tag=tag)
    try:
        assert res.outcome == "succeeded", res.error
        deadline = time.monotonic() + 2
        while tagged_pids(tag) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert tagged_pids(tag) == []
    finally:
        for pid in tagged_pids(tag):
            os.kill(pid, 9)


@WARM
def test_proc_shows_the_tool_only_its_own_processes(hog: ToolSpec, home: Path, warm: bool) -> None:
    res = run(hog, "procs", home, warm=warm)
    assert res.outcome == "succeeded", res.error
    assert res.result is not None
    seen, me = res.result["procs"], res.result["me"]
    # Its namespace's pid 1 (which reaps and ends it) and itself: nothing of the host's.
    assert seen == [1, me]
    assert os.getpid() not in seen or os.getpid() in (1, me)


@pytest.mark.parametrize(
    ("text", "exit_code", "key"),
    [
        (
            "  os.fork()\nBlockingIOError: [Errno 11] Resource temporarily unavailable",
            1,
            "processes",
        ),
        ("RuntimeError: can't start new thread", 1, "processes"),
        ("bash: fork: retry: Resource temporarily unavailable", 1, "processes"),
        ("MemoryError", 1, "memory_mb"),
        ("OSError: [Errno 27] File too large", 1, "file_mb"),
        ("", -25, "file_mb"),  # SIGXFSZ: a program that does not catch it
        ("OSError: [Errno 24] Too many open files: '/dev/null'", 1, "open_files"),
        # A non-blocking socket's EAGAIN is no process limit.
        ("  sock.recv(10)\nBlockingIOError: [Errno 11] Resource temporarily unavailable", 1, None),
        ("ValueError: bad input", 1, None),
    ],
)
def test_a_failed_calls_output_names_the_limit_it_hit(
    text: str, exit_code: int, key: str | None
) -> None:
    found = explain(ToolLimits(), text, exit_code, scratch=True)
    assert found == (hit(key, ToolLimits()) if key else None)


def test_a_full_disk_is_the_scratch_folders_only_when_it_is_a_tmpfs_of_its_own() -> None:
    full = "OSError: [Errno 28] No space left on device"
    assert explain(ToolLimits(), full, 1, scratch=True) == hit("scratch", ToolLimits())
    assert explain(ToolLimits(), full, 1, scratch=False) is None
