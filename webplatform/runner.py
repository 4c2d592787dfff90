"""The one subprocess runner: turns a tool call into a process and its output into a RunResult.

Every surface (bridge, dashboard, CLI, worker) runs tools through `run()`. It knows nothing of
the database, the gate or approvals; callers decide *whether* to run, this module decides *how*:

- argv is a list (`<runtime> <entrypoint> ACTION --arg-name value ...`), never a shell;
- the environment is a small fixed base plus the tool's declared secrets, never the caller's;
- the tool runs in its own session; when it exits or times out its whole process group is
  killed with SIGKILL, so nothing it started outlives the run;
- stdout and stderr are read concurrently and capped, so a chatty tool cannot exhaust memory;
- a tool that misbehaves (hangs, crashes, prints garbage, is missing) yields a RunResult with a
  one-line `error` that says how to fix it; `run()` does not raise for tool misbehaviour.

`run()` blocks until the tool is done; async code calls it from a worker thread. A process that
leaves its session (its own `setsid`) escapes the group kill; containing that needs cgroups.
"""

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from webplatform import confine
from webplatform.launch import build_argv, build_env
from webplatform.outcome import RunResult, classify
from webplatform.redaction import NO_SECRETS, Redactor
from webplatform.registry.model import ActionSpec, ToolSpec
from webplatform.supervise import close_pipes, kill_group, supervise

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_OUTPUT_BYTES = 1_000_000


def run(
    tool: ToolSpec,
    action: ActionSpec,
    args: Mapping[str, Any],
    *,
    home: Path,
    secrets: Mapping[str, str],
    timeout_s: float | None = None,
    caller_cwd: Path | None = None,
    on_start: Callable[[int], None] | None = None,
    on_tick: Callable[[], None] | None = None,
    tick_s: float = 1.0,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    fence: confine.Fence | None = None,
    redact: Redactor = NO_SECRETS,
) -> RunResult:
    """Run one action of a tool to completion and describe what happened.

    The timeout is `action.timeout_s`, else `timeout_s`, else 60 s; on expiry the whole process
    group is killed. `on_start(pid)` is called right after the spawn, `on_tick()` every `tick_s`
    while the tool runs (a worker renews its lease there). If a callback raises, the process
    group is killed and the exception propagates: that is the caller's failure, not the tool's.
    `caller_cwd`, when given, reaches the tool as `AAT_CALLER_CWD` so it can resolve relative
    paths the user typed (the tool's own cwd is its folder), and is a workspace. The process is
    confined (`webplatform.confine`) by `fence`, by default one that protects `home`. `redact`
    masks secret values in stdout, stderr and the error line before any of them is cut (the
    parsed `result` is left for the caller to mask).
    """
    argv = build_argv(tool, action, args)
    env = build_env(tool, action, home=home, secrets=secrets, caller_cwd=caller_cwd)
    limit = action.timeout_s or timeout_s or DEFAULT_TIMEOUT_S
    problem = _missing_program(tool, argv[0], env["PATH"])
    jail = problem or confine.lock(tool, fence or confine.Fence(home=home), caller_cwd)
    if isinstance(jail, str):
        return _not_started(jail)
    with jail:
        argv, env = jail.wrap(argv), {**env, **jail.env}
        return _spawn(argv, env, tool, limit, on_start, on_tick, tick_s, max_output_bytes, redact)


def _spawn(
    argv: list[str],
    env: dict[str, str],
    tool: ToolSpec,
    limit: float,
    on_start: Callable[[int], None] | None,
    on_tick: Callable[[], None] | None,
    tick_s: float,
    max_output_bytes: int,
    redact: Redactor,
) -> RunResult:
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=tool.folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte inside an argument
        return _not_started(f"could not start {argv[0]}: {exc}; check the manifest's runtime")
    try:
        if on_start:
            on_start(proc.pid)
        capture = supervise(proc, limit, on_tick, tick_s, max_output_bytes)
    except BaseException:
        kill_group(proc.pid)
        proc.wait()
        close_pipes(proc)
        raise
    return classify(capture, proc, limit, time.monotonic() - started, max_output_bytes, redact)


def _missing_program(tool: ToolSpec, program: str, path: str) -> str | None:
    entry = tool.entrypoint_path
    if not entry.is_file():
        return f"entrypoint {entry} does not exist; fix `entrypoint` in {tool.manifest_path.name}"
    if tool.runtime == "exec" and not os.access(entry, os.X_OK):
        return f"entrypoint {entry} is not executable; chmod +x it or set a runtime"
    if tool.runtime in ("bash", "node") and shutil.which(program, path=path) is None:
        return f"{program} is not installed (looked in {path}); install it or change the runtime"
    return None


def _not_started(error: str) -> RunResult:
    return RunResult("failed", None, None, "", "", error, 0.0, None)
