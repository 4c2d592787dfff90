"""The runner against real subprocesses: the fixture tools in tests/tools/ misbehave on purpose."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from webplatform.config import EXAMPLES_ROOT
from webplatform.process import launch, runner
from webplatform.process.outcome import RunResult
from webplatform.registry.model import ActionSpec, ArgSpec, ToolSpec

TOOLS = Path(__file__).parent / "tools"
BASE_ENV_KEYS = {
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "PYTHONIOENCODING",
    "PYTHONUNBUFFERED",
    "AAT_HOME",
    "AAT_TOOL",
    "AAT_ACTION",
    "AAT_WORKSPACES",  # the call's workspaces, so a tool can say where it may write
}


def load_tool(folder: Path) -> ToolSpec:
    """A ToolSpec straight from tool.yaml, without the registry loader (tested on its own)."""
    raw = yaml.safe_load((folder / "tool.yaml").read_text(encoding="utf-8"))
    actions = tuple(
        ActionSpec(
            name=a["name"],
            read_only=a.get("read_only", False),
            timeout_s=a.get("timeout_s"),
            args=tuple(ArgSpec(name=g["name"], type=g["type"]) for g in a.get("args") or ()),
        )
        for a in raw["actions"]
    )
    return ToolSpec(
        kind="tool",
        name=raw["name"],
        description=raw["description"],
        version=raw["version"],
        runtime=raw["runtime"],
        entrypoint=raw["entrypoint"],
        folder=folder,
        manifest_path=folder / "tool.yaml",
        secrets=tuple(raw.get("secrets") or ()),
        actions=actions,
        reads=tuple(raw.get("reads") or ()),
        writes=tuple(raw.get("writes") or ()),
        warm=bool(raw.get("warm", False)),
    )


def call(
    name: str, action: str, args: dict[str, Any] | None = None, *, home: Path, **kw: Any
) -> RunResult:
    tool = load_tool(TOOLS / name)
    spec = tool.action(action)
    assert spec is not None
    kw.setdefault("secrets", {})
    hooks = {k: kw.pop(k) for k in ("on_start", "on_tick", "tick_s", "go_ahead") if k in kw}
    return runner.run(runner.ToolCall(tool, spec, args or {}, home=home, **kw), **hooks)


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie waiting for its reaper counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_dead(pid: int, within_s: float = 3.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


# --- argv ------------------------------------------------------------------------------------


def test_argv_follows_the_invocation_contract() -> None:
    tool = load_tool(TOOLS / "echo")
    argv = launch.build_argv(
        tool,
        tool.actions[0],
        {
            "text": "plain",
            "data": {"a": [1, "ž"]},
            "items": ["x", 2],
            "count": 3,
            "flag": True,
            "off": False,
            "none": None,
            "dash": "--help",
            "neg": -5,
        },
    )
    assert argv == [
        sys.executable,
        str(TOOLS / "echo" / "main.py"),
        "echo",
        *("--text", "plain"),
        *("--data", '{"a": [1, "ž"]}'),
        *("--items", '["x", 2]'),
        *("--count", "3"),
        "--flag",
        "--dash=--help",
        "--neg=-5",
    ]


def test_structured_and_non_ascii_args_arrive_intact(home: Path) -> None:
    text = "Žluťoučký kůň úpěl ďábelské ódy 🐎"
    args = {"text": text, "data": {"jméno": "Ž", "n": [1, 2]}, "items": [], "flag": True}
    res = call("echo", "echo", args, home=home)
    assert res.outcome == "succeeded", res.error
    assert res.result is not None
    assert res.result["argv"] == [
        "echo",
        *("--text", text),
        *("--data", '{"jméno": "Ž", "n": [1, 2]}'),
        *("--items", "[]"),
        "--flag",
    ]
    assert text in res.stdout


@pytest.mark.parametrize("value", ["--help", "-x", "-", "--name=other"])
def test_value_starting_with_dash_reaches_hello_world_as_the_value(home: Path, value: str) -> None:
    tool = load_tool(EXAMPLES_ROOT / "tools" / "hello-world")
    res = runner.run(runner.ToolCall(tool, tool.actions[0], {"name": value}, home=home))
    assert res.outcome == "succeeded", res.error
    assert res.result == {"greeting": f"Hello, {value}!"}


# --- environment -------------------------------------------------------------------------------


def test_environment_is_the_fixed_base_not_the_callers(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AAT_LEAK_CHECK", "must-not-reach-the-tool")
    monkeypatch.setenv("ECHO_TOKEN", "from-the-parent-shell")
    res = call("echo", "echo", home=home)
    assert res.result is not None
    env = res.result["env"]
    assert set(env) == BASE_ENV_KEYS
    assert env["AAT_HOME"] == str(home)
    assert (env["AAT_TOOL"], env["AAT_ACTION"]) == ("echo", "echo")
    assert env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert res.result["cwd"] == str(TOOLS / "echo")
    assert res.result["stdin"] == ""


def test_secrets_reach_the_tool_only_when_given_and_declared(home: Path) -> None:
    given = {"ECHO_TOKEN": "s3cret", "OTHER_TOKEN": "not-declared", "PATH": "/evil"}
    res = call("echo", "echo", home=home, secrets=given)
    assert res.result is not None
    env = res.result["env"]
    assert env["ECHO_TOKEN"] == "s3cret"
    assert "OTHER_TOKEN" not in env
    assert env["PATH"] != "/evil"
    without = call("echo", "echo", home=home, secrets={})
    assert without.result is not None
    assert "ECHO_TOKEN" not in without.result["env"]


def test_caller_cwd_is_passed_as_aat_caller_cwd(home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"  # a folder of its own: a workspace may not contain AAT_HOME
    work.mkdir()
    res = call("echo", "echo", home=home, caller_cwd=work)
    assert res.result is not None
    assert res.result["env"]["AAT_CALLER_CWD"] == str(work)


# --- outcomes ------------------------------------------------------------------------------------


def test_hanging_tool_times_out_fast(home: Path) -> None:
    started = time.monotonic()
    res = call("misbehave", "hang", home=home, timeout_s=0.5)
    assert time.monotonic() - started < 3
    assert res.outcome == "timed_out"
    assert res.exit_code is None
    assert res.error == (
        "timed out after 0.5 s; raise timeout_s in the manifest or narrow the call"
    )
    assert res.pid is not None and wait_dead(res.pid)


def test_grandchild_ignoring_sigterm_dies_with_the_timeout(home: Path) -> None:
    res = call("misbehave", "grandchild", home=home, timeout_s=1.0)
    assert res.outcome == "timed_out"
    grandchild = int((home / "data" / "misbehave" / "grandchild.pid").read_text())
    assert wait_dead(grandchild), f"grandchild {grandchild} survived the timeout"


def test_child_left_behind_does_not_hang_the_run_and_is_killed(home: Path) -> None:
    started = time.monotonic()
    res = call("misbehave", "stray", home=home, timeout_s=20)
    assert time.monotonic() - started < 5
    assert res.outcome == "succeeded", res.error
    assert res.result == {"ok": True}
    assert wait_dead(int((home / "data" / "misbehave" / "stray.pid").read_text()))


def test_crash_is_a_failure_with_the_stderr_tail(home: Path) -> None:
    res = call("misbehave", "crash", home=home)
    assert res.outcome == "failed"
    assert res.exit_code == 1
    assert res.error == "exit 1: ZeroDivisionError: division by zero in the fixture"
    assert "Traceback" in res.stderr
    assert res.result is None


def test_json_error_and_stderr_line_both_reach_the_error(home: Path) -> None:
    res = call("misbehave", "fail-json", home=home)
    assert res.outcome == "failed"
    assert res.exit_code == 3
    assert res.error == (
        "exit 3: remote answered 403 Forbidden; request to https://example.invalid failed"
    )


def test_exit_2_is_a_usage_error(home: Path) -> None:
    res = call("misbehave", "usage", home=home)
    assert res.outcome == "usage_error"
    assert res.exit_code == 2
    assert res.error == "exit 2 (usage error): unknown --colour; did you mean --color?"


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("garbage", "tool printed non-JSON output (first bytes: 'Hello, I am not JSON')"),
        ("not-object", "tool printed JSON list, not an object"),
        ("silent", "tool printed nothing on stdout"),
    ],
)
def test_exit_0_without_a_json_object_is_a_clear_failure(
    home: Path, action: str, expected: str
) -> None:
    res = call("misbehave", action, home=home)
    assert res.outcome == "failed"
    assert res.exit_code == 0
    assert res.error is not None
    assert res.error.startswith(expected)
    assert "it must print one JSON object" in res.error


def test_killed_by_a_signal_names_it(home: Path) -> None:
    res = call("misbehave", "signal", home=home)
    assert res.outcome == "failed"
    assert res.exit_code == -15
    assert res.error is not None and res.error.startswith("killed by signal SIGTERM (15)")


def test_flood_of_output_is_capped_and_fails_clearly(home: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    started = time.monotonic()
    res = call("misbehave", "flood", home=home, max_output_bytes=100_000)
    assert time.monotonic() - started < 10
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 30, f"runner held {grown_mib:.0f} MiB for 100 kB of kept output"
    assert res.outcome == "failed"
    assert res.stdout_truncated and res.stderr_truncated
    assert len(res.stdout.encode()) == 100_000
    assert len(res.stderr.encode()) <= 100_000
    assert res.stderr.endswith("END-OF-STDERR\n")  # the tail is what is kept
    assert res.error is not None and "more than 100000 bytes on stdout" in res.error


def test_missing_entrypoint_is_a_failure_not_an_exception(home: Path, tmp_path: Path) -> None:
    tool = load_tool(TOOLS / "echo")
    broken = ToolSpec(**{**tool.__dict__, "entrypoint": "gone.py"})
    res = runner.run(runner.ToolCall(broken, broken.actions[0], {}, home=home))
    assert res.outcome == "failed"
    assert res.pid is None
    assert res.error is not None and "gone.py does not exist" in res.error


def test_exec_entrypoint_that_is_not_executable_fails_clearly(home: Path, tmp_path: Path) -> None:
    (tmp_path / "tool.sh").write_text("echo '{}'\n")
    tool = ToolSpec(
        kind="tool",
        name="noexec",
        description="",
        version="0",
        runtime="exec",
        entrypoint="tool.sh",
        folder=tmp_path,
        manifest_path=tmp_path / "tool.yaml",
        actions=(ActionSpec(name="go"),),
    )
    res = runner.run(runner.ToolCall(tool, tool.actions[0], {}, home=home))
    assert res.outcome == "failed"
    assert res.error is not None and "is not executable" in res.error


def exec_tool(folder: Path, script: str) -> ToolSpec:
    """An `exec` runtime tool whose entrypoint is `script`, made executable."""
    folder.mkdir()
    entry = folder / "tool.sh"
    entry.write_text(script)
    entry.chmod(0o755)
    return ToolSpec(
        kind="tool",
        name="exectool",
        description="",
        version="0",
        runtime="exec",
        entrypoint="tool.sh",
        folder=folder,
        manifest_path=folder / "tool.yaml",
        actions=(ActionSpec(name="go"),),
    )


def test_an_entrypoint_the_kernel_cannot_execute_is_not_started(home: Path, tmp_path: Path) -> None:
    tool = exec_tool(tmp_path / "noshebang", "echo '{}'\n")  # no #! line: ENOEXEC
    res = runner.run(runner.ToolCall(tool, tool.actions[0], {}, home=home))
    assert res.outcome == "failed" and res.pid is None
    assert res.error is not None
    assert res.error.startswith(f"could not start {tool.entrypoint_path}: [Errno 8]")
    assert res.error.endswith("check the manifest's runtime")


def test_a_plain_call_starts_with_the_signals_a_direct_spawn_gives(
    home: Path, tmp_path: Path
) -> None:
    script = (
        "#!/bin/sh\n"
        "while read -r k v; do case $k in SigIgn:) i=$v;; SigBlk:) b=$v;; esac; done"
        " < /proc/self/status\n"
        'printf \'{"ignored": "%s", "blocked": "%s"}\\n\' "$i" "$b"\n'
    )
    tool = exec_tool(tmp_path / "signals", script)
    res = runner.run(runner.ToolCall(tool, tool.actions[0], {}, home=home))
    assert res.outcome == "succeeded", res.error
    argv = launch.build_argv(tool, tool.actions[0], {})
    env = launch.build_env(tool, tool.actions[0], home=home, secrets={})
    direct = subprocess.run(
        argv, env=env, cwd=tool.folder, capture_output=True, check=True, start_new_session=True
    )
    assert res.result == json.loads(direct.stdout)


def test_bash_runtime_finds_aat_python_first(home: Path) -> None:
    res = call("shell", "where", {"text": "x y"}, home=home)
    assert res.outcome == "succeeded", res.error
    assert res.result == {
        "action": "where",
        "argc": 3,
        "python3": str(Path(sys.executable).parent / "python3"),
    }


def test_exec_runtime_runs_the_entrypoint_itself(home: Path) -> None:
    res = call("exec-tool", "ping", home=home)
    assert res.outcome == "succeeded", res.error
    assert res.result == {"pong": "ping"}


# --- callbacks -----------------------------------------------------------------------------------


def test_on_start_gets_the_pid_and_on_tick_runs_while_waiting(home: Path) -> None:
    started: list[int] = []
    ticks: list[float] = []
    res = call(
        "misbehave",
        "hang",
        home=home,
        timeout_s=0.6,
        on_start=started.append,
        on_tick=lambda: ticks.append(time.monotonic()),
        tick_s=0.1,
    )
    assert res.outcome == "timed_out"
    assert started == [res.pid]
    assert 3 <= len(ticks) <= 8


def test_a_failing_tick_kills_the_tool_and_propagates(home: Path) -> None:
    pids: list[int] = []

    def lease_lost() -> None:
        raise RuntimeError("lease lost")

    with pytest.raises(RuntimeError, match="lease lost"):
        call(
            "misbehave",
            "hang",
            home=home,
            timeout_s=30,
            on_start=pids.append,
            on_tick=lease_lost,
            tick_s=0.1,
        )
    assert wait_dead(pids[0])
