"""The warm runner (SPEC §12) against the plain one: real zygotes, real forks, real Landlock.

Every observation is made twice, once with the tool forked from its warm interpreter and once
spawned plain, and the answers must be the same; then the ways a warm tool can misbehave.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_runner import TOOLS, load_tool, wait_dead

from webplatform.process import confine, runner, spawner, warm
from webplatform.process.confine import sweep
from webplatform.process.outcome import RunResult

TESTS = TOOLS.parent
# What differs call by call however the tool runs: its ids and its fresh scratch folder.
PER_CALL = ("pid", "pgid", "sid", "tempfile")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / "data" / "misbehave").mkdir(parents=True)
    (path / "aat.db").write_text("not for tools")
    return path


def run(
    name: str, action: str, *, warmly: bool, home: Path, folder: Path | None = None, **kw: Any
) -> RunResult:
    tool = replace(load_tool(folder or TOOLS / name), warm=warmly)
    spec = tool.action(action)
    assert spec is not None
    kw.setdefault("secrets", {})
    kw.setdefault("fence", confine.Fence(home=home, registry_roots=(TESTS,)))
    hooks = {k: kw.pop(k) for k in ("on_start", "on_tick", "tick_s", "go_ahead") if k in kw}
    return runner.run(runner.ToolCall(tool, spec, kw.pop("args", {}), home=home, **kw), **hooks)


def both(name: str, action: str, **kw: Any) -> tuple[RunResult, RunResult]:
    return run(name, action, warmly=False, **kw), run(name, action, warmly=True, **kw)


def same(plain: RunResult, warm_: RunResult) -> None:
    """What a caller sees of the two runs is identical, stderr included."""
    for field in ("outcome", "exit_code", "result", "error", "stdout", "stderr"):
        assert getattr(warm_, field) == getattr(plain, field), field


def observed(result: RunResult) -> dict[str, Any]:
    assert result.outcome == "succeeded", result.error
    assert result.result is not None
    return result.result


def zygote_of(name: str) -> int:
    pid = warm.zygote_pid(replace(load_tool(TOOLS / name), warm=True))
    assert pid is not None
    return pid


# --- the same observations, warm and plain ------------------------------------------------------


def test_a_warm_call_observes_exactly_what_a_plain_call_does(home: Path) -> None:
    secrets = {"OBSERVE_TOKEN": "s3cret", "UNDECLARED": "never", "PATH": "/evil"}
    answers = [
        observed(run("observe", "observe", warmly=w, home=home, secrets=secrets))
        for w in (False, True, True, False)
    ]
    for seen in answers:
        # Its own session and process group, led by itself; TMPDIR its own fresh scratch.
        assert seen["pid"] == seen["pgid"] == seen["sid"]
        assert seen["tempfile"] == seen["env"]["TMPDIR"] != "/tmp"
        assert seen["env"]["OBSERVE_TOKEN"] == "s3cret" and "UNDECLARED" not in seen["env"]
        assert seen["cwd"] == str(TOOLS / "observe")
        assert seen["calls"] == seen["json_calls"] == 1  # nothing left from an earlier call
        assert seen["fds"] == ["0", "1", "2", "3"]  # 3 is the listing's own
        assert seen["threads"] == 1
    # Each call is a process of its own, in a PID namespace of its own (SPEC §20): its pid
    # may repeat from call to call, its scratch folder never does.
    assert len({seen["tempfile"] for seen in answers}) == len(answers)
    assert len({seen["env"]["TMPDIR"] for seen in answers}) == len(answers)
    for seen in answers:
        seen["env"].pop("TMPDIR")
        for key in PER_CALL:
            seen.pop(key)
    plain, warm_, warm_again, plain_again = answers
    assert warm_ == plain == warm_again == plain_again


def test_a_warm_call_imports_nothing_its_interpreter_could_have_imported(home: Path) -> None:
    # The standard library imports some modules only as it works (argparse's
    # textwrap, gettext's locale; runpy's pkgutil to run the entrypoint): a warm interpreter
    # imports those too, so its calls do not each pay for them.
    plain = observed(run("observe", "imports", warmly=False, home=home))
    assert {"textwrap", "locale"} <= set(plain["imported"])
    assert observed(run("observe", "imports", warmly=True, home=home))["imported"] == []


def test_argv_and_non_ascii_arguments_arrive_the_same(home: Path) -> None:
    args = {"text": "Žofie --x", "data": {"a": [1, "ž"]}, "count": 3, "flag": True}
    plain, warm_ = both("echo", "echo", home=home, args=args)
    for result in (plain, warm_):
        observed(result)["env"].pop("TMPDIR")  # each call's own scratch folder
    assert observed(warm_) == observed(plain)
    assert observed(warm_)["argv"][:3] == ["echo", "--text", "Žofie --x"]


@pytest.mark.parametrize(
    ("action", "outcome", "code"),
    [
        ("exit3", "failed", 3),
        ("os-exit", "failed", 5),
        ("stdin", "succeeded", 0),
        ("fork", "succeeded", 0),
        ("setsid", "succeeded", 0),
        ("flood", "failed", 0),
    ],
)
def test_exits_stdin_forks_sessions_and_floods_end_the_same(
    home: Path, action: str, outcome: str, code: int
) -> None:
    plain, warm_ = both("observe", action, home=home)
    same(plain, warm_)
    assert (warm_.outcome, warm_.exit_code) == (outcome, code), warm_.error
    if action == "stdin":
        assert warm_.result == {"stdin": ""}
    if action == "fork":
        assert warm_.result == {"child_exit": 7}
    if action == "setsid":  # already a session leader, so the kernel refuses
        assert warm_.result == {"setsid": "Operation not permitted"}
    if action == "flood":
        assert warm_.error is not None and "more than 1000000 bytes" in warm_.error


@pytest.mark.parametrize("action", ["crash", "usage", "fail-json", "signal", "garbage"])
def test_crashes_and_usage_errors_end_the_same(home: Path, action: str) -> None:
    plain, warm_ = both("misbehave", action, home=home)
    same(plain, warm_)  # tracebacks included: they start at the tool's own frame


def test_a_timeout_kills_the_group_with_a_grandchild_that_ignores_sigterm(home: Path) -> None:
    results = []
    for warmly in (False, True):
        started = time.monotonic()
        res = run("misbehave", "grandchild", warmly=warmly, home=home, timeout_s=1.0)
        assert time.monotonic() - started < 5
        grandchild = int((home / "data" / "misbehave" / "grandchild.pid").read_text())
        assert wait_dead(grandchild), f"grandchild {grandchild} survived (warm={warmly})"
        assert res.pid is not None and wait_dead(res.pid)
        results.append(res)
    same(*results)
    assert results[1].outcome == "timed_out" and results[1].exit_code is None


# --- confinement (SPEC §14): the same refusals ---------------------------------------------------


@pytest.mark.parametrize(
    ("walls", "refusals"),
    [
        # A folder that is not there gets a file planted at its path: in a read-only folder.
        ("namespaces", ("No such file or directory", "Read-only file system")),
        ("landlock alone", ("Permission denied",)),
    ],
)
def test_confinement_refuses_a_warm_tool_exactly_as_a_plain_one(
    home: Path, walls: str, refusals: tuple[str, ...]
) -> None:
    """In namespaces, aat's files are not there at all (SPEC §17); without them, Landlock
    refuses them (SPEC §14): the second wall holds on its own."""
    alone = walls == "landlock alone"
    fence = confine.Fence(
        home=home, registry_roots=(TESTS,), landlock_alone=alone, pretend_no_namespaces=alone
    )
    targets = [
        (home / "aat.db", "read"),
        (home / "aat.db", "write"),
        (home, "write"),
        (TOOLS / "echo" / "tool.yaml", "write"),
        (TOOLS / "observe", "write"),
        (Path(runner.__file__), "write"),
    ]
    for target, mode in targets:
        args = {"target": str(target), "mode": mode}
        plain, warm_ = both("escape", "probe", home=home, args=args, fence=fence)
        same(plain, warm_)
        assert warm_.error is not None, (target, mode)
        assert any(refusal in warm_.error for refusal in refusals), (target, mode, warm_.error)
    plain, warm_ = both("escape", "approve-all", home=home, fence=fence)
    same(plain, warm_)
    assert warm_.error is not None and "unable to open database file" in warm_.error
    assert not (home / "escape-probe").exists()


def test_a_warm_tool_writes_its_scratch_and_nothing_else(home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    args = {"workspace-file": str(work / "out.txt")}
    plain, warm_ = both("escape", "scratch", home=home, args=args, caller_cwd=work)
    assert (warm_.result or {})["workspace"] == "workspace", warm_.error
    assert {**(warm_.result or {}), "tmpdir": ""} == {**(plain.result or {}), "tmpdir": ""}
    assert sweep.settle(timeout_s=10)  # removed once the call is done, off its answer's path
    assert not Path((warm_.result or {})["tmpdir"]).exists()


# --- what a warm tool can do to its warm interpreter ---------------------------------------------


def test_leaked_descriptors_and_threads_stay_with_the_call(home: Path) -> None:
    plain, warm_ = both("observe", "leak", home=home)
    same(plain, warm_)
    assert warm_.outcome == "succeeded" and warm_.stderr == "late thread done\n"
    zygote = zygote_of("observe")
    ours, theirs = _fds(os.getpid()), _quiet_fds(zygote)
    for _ in range(3):
        assert run("observe", "leak", warmly=True, home=home).outcome == "succeeded"
    # The warm interpreter closes a call's socket just after it reports the exit status, so
    # both counts are taken once it is quiet; a descriptor kept per call shows as growth.
    assert _quiet_fds(zygote) == theirs
    assert _fds(os.getpid()) <= ours  # (earlier tests' garbage may be collected meanwhile)
    assert zygote_of("observe") == zygote


@pytest.mark.parametrize("warmly", [True, False], ids=["warm", "plain"])
def test_a_tool_cannot_kill_the_process_that_forked_it(home: Path, warmly: bool) -> None:
    """Landlock scopes signals to the tool's own domain (ABI 6): its warm interpreter, or the
    spawner of plain calls, lives on for the calls after it."""
    run("observe", "version", warmly=warmly, home=home)
    parent = zygote_of("observe") if warmly else spawner.spawner_pid()
    res = run("observe", "kill-parent", warmly=warmly, home=home)
    assert res.result == {"kill": "Operation not permitted"}, res
    assert observed(run("observe", "version", warmly=warmly, home=home)) == {"version": 1}
    assert (zygote_of("observe") if warmly else spawner.spawner_pid()) == parent


def test_a_warm_interpreter_that_dies_mid_call_fails_the_call_clearly(home: Path) -> None:
    run("observe", "version", warmly=True, home=home)
    zygote = zygote_of("observe")
    started: list[int] = []
    done: list[RunResult] = []
    call = threading.Thread(
        target=lambda: done.append(
            run("misbehave", "hang", warmly=True, home=home, on_start=started.append)
        )
    )
    call.start()
    deadline = time.monotonic() + 10
    while not started and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(zygote_of("misbehave"), signal.SIGKILL)
    call.join(10)
    assert not call.is_alive()
    res = done[0]
    assert res.outcome == "failed" and res.exit_code is None
    assert res.error == (
        "the warm interpreter of misbehave died during the call, which was stopped; "
        "call again (a new one starts), or set `warm: false` in its manifest"
    )
    assert wait_dead(started[0])  # the tool's group was killed with it
    assert zygote_of("observe") == zygote  # one warm interpreter per tool
    again = run("misbehave", "usage", warmly=True, home=home)
    assert again.outcome == "usage_error", again.error


def test_a_warm_interpreter_killed_between_calls_is_replaced(home: Path) -> None:
    run("observe", "version", warmly=True, home=home)
    zygote = zygote_of("observe")
    os.kill(zygote, signal.SIGKILL)
    assert wait_dead(zygote)
    assert observed(run("observe", "version", warmly=True, home=home)) == {"version": 1}
    assert zygote_of("observe") != zygote


def test_an_edited_tool_is_picked_up_by_the_next_call(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "observe"
    shutil.copytree(TOOLS / "observe", folder)
    assert observed(run("observe", "version", warmly=True, home=home, folder=folder)) == {
        "version": 1
    }
    tool = replace(load_tool(folder), warm=True)
    before = warm.zygote_pid(tool)
    main = folder / "main.py"
    main.write_text(main.read_text().replace("VERSION = 1", "VERSION = 2"))
    os.utime(main, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert observed(run("observe", "version", warmly=True, home=home, folder=folder)) == {
        "version": 2
    }
    assert before is not None and warm.zygote_pid(tool) not in (None, before)
    assert wait_dead(before)  # the old one exits once it has no call left


def test_two_calls_to_one_warm_tool_run_at_once(home: Path) -> None:
    run("observe", "version", warmly=True, home=home)
    results: list[RunResult] = []
    calls = [
        threading.Thread(
            target=lambda: results.append(run("observe", "nap", warmly=True, home=home))
        )
        for _ in range(2)
    ]
    for call in calls:
        call.start()
    for call in calls:
        call.join(20)
    first, second = (observed(r) for r in results)
    # Both were asleep at the same moment: neither waited for the other.
    assert max(first["started"], second["started"]) < min(first["ended"], second["ended"])


MARKER_TOOL = """\
import json, os, pathlib
pathlib.Path(os.environ["AAT_CALLER_CWD"], "ran").touch()
print(json.dumps({}))
"""


@pytest.mark.parametrize("warmly", [False, True])
def test_the_tool_starts_only_on_its_go_ahead_and_never_when_that_fails(
    home: Path, tmp_path: Path, warmly: bool
) -> None:
    # The caller writes the job's row in `go_ahead`, while the process is prepared: nothing of
    # the tool may run before it returns, and nothing at all if it raises.
    folder = tmp_path / "registry" / "marker"
    folder.mkdir(parents=True)
    (folder / "main.py").write_text(MARKER_TOOL)
    (folder / "tool.yaml").write_text(
        "name: marker\ndescription: x\nversion: '1'\nruntime: python\nentrypoint: main.py\n"
        "actions:\n  - {name: mark, description: x, read_only: true}\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    ran = work / "ran"
    fence = confine.Fence(home=home, registry_roots=(folder.parent,))
    seen: list[bool] = []

    def go_ahead() -> None:
        # Time enough for a tool that did not wait to have run, even one that starts a whole
        # interpreter on a loaded machine; a tool that ran ends the wait at once.
        deadline = time.monotonic() + 1.5
        while not ran.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        seen.append(ran.exists())

    first = run("", "mark", warmly=warmly, home=home, folder=folder, fence=fence,
                caller_cwd=work, go_ahead=go_ahead)  # fmt: skip
    assert first.outcome == "succeeded", first.error
    assert seen == [False] and ran.exists()
    ran.unlink()

    def refuse() -> None:
        raise RuntimeError("the job's row was not written")

    with pytest.raises(RuntimeError, match="row was not written"):
        run("", "mark", warmly=warmly, home=home, folder=folder, fence=fence,
            caller_cwd=work, go_ahead=refuse)  # fmt: skip
    time.sleep(0.5)
    assert not ran.exists(), "a call whose go-ahead failed ran anyway"
    again = run("", "mark", warmly=warmly, home=home, folder=folder, fence=fence, caller_cwd=work)
    assert again.outcome == "succeeded" and ran.exists(), "the next call runs as usual"


def _quiet_fds(pid: int, within_s: float = 3.0) -> int:
    """The process's descriptor count once it has not changed for 0.2 s."""
    deadline, count = time.monotonic() + within_s, _fds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        again = _fds(pid)
        if again == count:
            break
        count = again
    return count


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))
