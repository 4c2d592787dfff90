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

A confined call starts from a zygote of `webplatform.process.spawner`; a `warm: true` python
tool runs in a child forked from its warm interpreter (`webplatform.process.warm`, SPEC §12);
what it can observe is the same as from a plain spawn. The caller's own work for the call (the
job's row) overlaps the start: see `go_ahead` in `run()`.

`run()` blocks until the tool is done; async code calls it from a worker thread. A confined
call runs in a PID namespace of its own (see `confine/zygote.py`), so a process that leaves
its session (its own `setsid`) still ends with the call; its limits (SPEC §20) are held
there too, and `limits.explain` names the one a failed call hit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from webplatform.process import confine, limits, server_pool, spawner, warm
from webplatform.process.confine import denials
from webplatform.process.launch import build_argv, build_env
from webplatform.process.outcome import RunResult, classify
from webplatform.process.supervise import (
    Capture,
    Process,
    Watch,
    close_pipes,
    kill_group,
    supervise,
)
from webplatform.redaction import NO_SECRETS, Redactor
from webplatform.registry.model import ActionSpec, ToolSpec

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_OUTPUT_BYTES = 1_000_000


@dataclass(frozen=True)
class ToolCall:
    """One action of a tool to run, with its arguments and what it runs with.

    The timeout is `action.timeout_s`, else `timeout_s`, else 60 s. `caller_cwd`, when given,
    reaches the tool as `AAT_CALLER_CWD` so it can resolve relative paths the user typed (the
    tool's own cwd is its folder), and is a workspace. The process is confined
    (`process.confine`) by `fence`, by default one that protects `home`. `redact` masks secret
    values in stdout, stderr and the error line before any of them is cut (the parsed `result`
    is left for the caller to mask); each is cut to `max_output_bytes`.
    """

    tool: ToolSpec
    action: ActionSpec
    args: Mapping[str, Any]
    home: Path
    secrets: Mapping[str, str] = field(default_factory=dict)
    caller_cwd: Path | None = None
    timeout_s: float | None = None
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    fence: confine.Fence | None = None
    redact: Redactor = NO_SECRETS


def run(
    call: ToolCall,
    *,
    on_start: Callable[[int], None] | None = None,
    on_tick: Callable[[], None] | None = None,
    tick_s: float = 1.0,
    go_ahead: spawner.GoAhead | None = None,
) -> RunResult:
    """Run one action of a tool to completion and describe what happened.

    On the timeout's expiry the whole process group is killed. `on_start(pid)` is called
    right after the spawn, `on_tick()` every `tick_s` while the tool runs (a worker renews its
    lease there). If a callback raises, the process group is killed and the exception
    propagates: that is the caller's failure, not the tool's. `go_ahead()`, when given, runs
    once the process exists and before it runs anything of the tool (the caller writes the
    job's row there, while the process is being prepared); if it raises, the process ends
    without running the tool and the exception propagates. When nothing could be started,
    it may not have been called (the result says why).
    """
    tool, action = call.tool, call.action
    if tool.server is not None:  # an upstream MCP server's tool: forwarded, not spawned
        return server_pool.run(
            call, on_start=on_start, on_tick=on_tick, tick_s=tick_s, go_ahead=go_ahead
        )
    argv = build_argv(tool, action, call.args)
    env = build_env(tool, action, home=call.home, secrets=call.secrets, caller_cwd=call.caller_cwd)
    fence = call.fence or confine.Fence(home=call.home)
    try:
        _check_program(tool, argv[0], env["PATH"])
        jail = confine.lock(tool, fence, call.caller_cwd)
    except confine.NotStarted as refused:
        return _not_started(str(refused))
    if jail.note is not None:
        # The caller's folder was left out (jail.note says why): the tool runs as if it
        # had been called without one.
        env.pop("AAT_CALLER_CWD", None)
    limit = action.timeout_s or call.timeout_s or DEFAULT_TIMEOUT_S
    launch = _Launch(tool, jail, argv, {**env, **jail.env}, limit)
    watch = Watch(limit, on_tick, tick_s, call.max_output_bytes)
    with jail:
        result = _run_jailed(launch, _Hooks(watch, on_start, call.redact), go_ahead)
    result = _explain_refusal(result, tool, jail, fence)
    return result if jail.note is None else replace(result, note=jail.note)


@dataclass(frozen=True)
class _Launch:
    """What is started for one call: the tool, its jail, argv and whole environment, and
    its time limit."""

    tool: ToolSpec
    jail: confine.Jail
    argv: list[str]
    env: dict[str, str]
    limit: float


@dataclass(frozen=True)
class _Hooks:
    """How a started call is watched, told of and masked (see `run`)."""

    watch: Watch
    on_start: Callable[[int], None] | None
    redact: Redactor


def _explain_refusal(
    result: RunResult, tool: ToolSpec, jail: confine.Jail, fence: confine.Fence
) -> RunResult:
    """`result` with its error saying why, when the tool failed on its confinement: the path
    it was refused and how to allow it (`confine.denials`), else the connection its manifest
    does not allow and how to declare one (SPEC §17), else the limit it hit (SPEC §20)."""
    if result.outcome not in ("failed", "usage_error") or not result.error:
        return result
    extra = None
    text = f"{result.stderr}\n{result.error}"
    if jail.paths is not None:
        extra = denials.hint(text, jail.paths, fence, namespaces=jail.netns is not None)
    # A named path is the surer sign; the network's words are the fallback.
    if extra is None and result.outcome == "failed":
        extra = confine.explain_network(tool.network, result.error, result.stderr)
    if extra is None and result.outcome == "failed" and result.pid is not None:
        scratch = jail.netns is not None
        extra = limits.explain(tool.limits, text, result.exit_code, scratch=scratch)
    if extra is None or extra in result.error:  # a stopped call names its limit already
        return result
    return replace(result, error=f"{result.error}; {extra}")


def _run_jailed(launch: _Launch, hooks: _Hooks, go_ahead: spawner.GoAhead | None) -> RunResult:
    """`run()` inside its jail: start, supervise and classify the process."""
    started = time.monotonic()
    try:
        proc = _start(launch, go_ahead)
    except confine.NotStarted as failed:
        return _not_started(str(failed))
    try:
        if hooks.on_start:
            hooks.on_start(proc.pid)
        capture = _watch(proc, hooks.watch)
    except BaseException:
        kill_group(proc.pid)
        proc.wait()
        close_pipes(proc)
        raise
    elapsed = time.monotonic() - started
    watch = hooks.watch
    result = classify(capture, proc, watch.limit, elapsed, watch.cap, hooks.redact)
    if isinstance(proc, spawner.SpawnedProcess):
        return _spawned_result(result, proc, launch)
    return result


def _spawned_result(result: RunResult, proc: spawner.SpawnedProcess, launch: _Launch) -> RunResult:
    """`result` of a call started by the spawner, saying so when its program could not be
    executed or its zygote died during the call."""
    if proc.exec_error is not None:
        return _not_started(_cannot_start(launch.argv[0], proc.exec_error))
    if proc.limit is not None and not proc.lost:
        error = f"{limits.hit(proc.limit, launch.tool.limits)}, and was stopped"
        return replace(result, outcome="failed", exit_code=None, result=None, error=error)
    if not proc.lost:
        return result
    error = (
        f"the warm interpreter of {launch.tool.name} died during the call, which was stopped; "
        "call again (a new one starts), or set `warm: false` in its manifest"
        if launch.tool.warm
        else "aat's spawner process died during the call, which was stopped; call again"
    )
    return replace(result, outcome="failed", exit_code=None, result=None, error=error)


def _start(launch: _Launch, go_ahead: spawner.GoAhead | None) -> Process:
    """The call's process, once it may go ahead (see `run`): forked warm (`warm: true`,
    SPEC §12) or spawned; `confine.NotStarted` says why not.

    A confined plain call is spawned by the exec-mode zygote (`spawner.spawn`), which
    confines the child before exec: a `preexec_fn` here would fork aat's whole process for
    each call.
    """
    tool, jail, argv, env = launch.tool, launch.jail, launch.argv, launch.env
    if tool.warm and tool.runtime == "python" and spawner.supported():
        view = jail.view(tool.folder.resolve())
        request = spawner.Request(argv, env, tool.folder, jail.request(), view, launch.limit)
        return warm.start(tool, request, go_ahead)
    if jail.paths is not None and spawner.supported():
        request = spawner.Request(argv, env, tool.folder, jail.request(), jail.view(), launch.limit)
        return spawner.spawn(request, go_ahead)
    try:
        confine_child = jail.preexec()
    except OSError as exc:
        raise confine.NotStarted(
            f"the tool was not run: confinement failed ({exc.strerror or exc})"
        ) from exc
    if go_ahead is not None:
        go_ahead()
    try:
        return subprocess.Popen(
            argv,
            cwd=tool.folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            preexec_fn=confine_child,
        )
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte inside an argument
        raise confine.NotStarted(_cannot_start(argv[0], str(exc))) from exc


def _cannot_start(program: str, why: str) -> str:
    return f"could not start {program}: {why}; check the manifest's runtime"


def _watch(proc: Process, watch: Watch) -> Capture:
    if isinstance(proc, spawner.SpawnedProcess):
        return supervise(proc, watch, exited=proc.has_exited, exit_fd=proc.exit_fd)
    return supervise(proc, watch)


def _check_program(tool: ToolSpec, program: str, path: str) -> None:
    """Raise `confine.NotStarted` when the tool's entrypoint or interpreter is missing."""
    entry = tool.entrypoint_path
    if not entry.is_file():
        raise confine.NotStarted(
            f"entrypoint {entry} does not exist; fix `entrypoint` in {tool.manifest_path.name}"
        )
    if tool.runtime == "exec" and not os.access(entry, os.X_OK):
        raise confine.NotStarted(
            f"entrypoint {entry} is not executable; chmod +x it or set a runtime"
        )
    if tool.runtime in ("bash", "node") and shutil.which(program, path=path) is None:
        raise confine.NotStarted(
            f"{program} is not installed (looked in {path}); install it or change the runtime"
        )


def _not_started(error: str) -> RunResult:
    return RunResult("failed", None, None, "", "", error, 0.0, None)
