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

from __future__ import annotations

import contextlib
import json
import os
import pwd
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, cast

from webplatform.registry.model import ActionSpec, ToolSpec

Outcome = Literal["succeeded", "failed", "usage_error", "timed_out"]

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_OUTPUT_BYTES = 1_000_000
# Fixed directories appended after the interpreter's own; enough for bash, node and coreutils.
BASE_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
# How long to keep draining pipes after the process group is dead. Only a process that escaped
# the group (its own setsid) can still hold them open, and we do not wait on it.
_DRAIN_GRACE_S = 0.5
_READ_CHUNK = 65536
_ERROR_MAX_CHARS = 500


@dataclass(frozen=True)
class RunResult:
    """What happened when a tool ran; `error` is one line saying what went wrong and what to do.

    `result` is the tool's JSON object, set only when `outcome` is "succeeded". `stdout` keeps the
    head of the output and `stderr` its tail (each at most `max_output_bytes`); the `*_truncated`
    flags say whether anything was dropped. `exit_code` is None when the process never started
    or was killed for its timeout, and negative (-signal) when something else killed it.
    """

    outcome: Outcome
    exit_code: int | None
    result: dict[str, Any] | None
    stdout: str
    stderr: str
    error: str | None
    duration_s: float
    pid: int | None
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the tool exited 0 and printed one JSON object."""
        return self.outcome == "succeeded"


def build_argv(tool: ToolSpec, action: ActionSpec, args: Mapping[str, Any]) -> list[str]:
    """The argv list for one call: `<runtime> <entrypoint> ACTION --arg-name value ...`.

    Rules tools can rely on (argparse parses all of them):
    - arguments appear in the order of `args`, names verbatim, each as `--name`;
    - `True` is the bare flag `--name`; `False` and `None` are left out;
    - numbers are JSON (`3`, `2.5`); dicts and lists are one JSON element (non-ASCII kept);
    - strings are passed as they are, as a separate element after `--name`;
    - any value whose text starts with `-` is joined as `--name=value`, because a parser
      would otherwise take `--force` or `-1` for an option instead of the value.
    The interpreter for `python` is the one running aat (`sys.executable`), so tools see aat's
    dependencies (openpyxl); `bash` and `node` are looked up on the runner's PATH; `exec`
    runs the entrypoint itself.
    """
    entry = str(tool.entrypoint_path)
    prefix = {
        "python": [sys.executable, entry],
        "bash": ["bash", entry],
        "node": ["node", entry],
        "exec": [entry],
    }[tool.runtime]
    argv = [*prefix, action.name]
    for name, value in args.items():
        if value is None or value is False:
            continue
        if value is True:
            argv.append(f"--{name}")
            continue
        text = _arg_text(value)
        if text.startswith("-"):
            argv.append(f"--{name}={text}")
        else:
            argv += [f"--{name}", text]
    return argv


def _arg_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple | int | float):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def build_env(
    tool: ToolSpec,
    action: ActionSpec,
    *,
    home: Path,
    secrets: Mapping[str, str],
    caller_cwd: Path | None = None,
) -> dict[str, str]:
    """The tool's whole environment: a fixed base, `AAT_*` facts, and its declared secrets.

    Nothing is inherited from the caller's environment, so a credential exported in the
    shell that started aat never reaches a tool that did not declare it. Secrets not named in
    `tool.secrets` are dropped, and no secret can override the base or the `AAT_*` keys.
    HOME is the user's real home directory (from the password database, not the caller's
    environment): it is not a secret, interpreters and `~/...` paths a user passes need it.
    Aat's own state directory is `AAT_HOME`.
    """
    interpreter_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join(dict.fromkeys([interpreter_dir, *BASE_PATH]))
    base = {
        "PATH": path,
        "HOME": _user_home(),
        "TMPDIR": tempfile.gettempdir(),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONUNBUFFERED": "1",
        "AAT_HOME": str(home),
        "AAT_TOOL": tool.name,
        "AAT_ACTION": action.name,
    }
    if caller_cwd is not None:
        base["AAT_CALLER_CWD"] = str(caller_cwd)
    declared = {k: v for k, v in secrets.items() if k in tool.secrets}
    return {**declared, **base}


def _user_home() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:  # a uid without a passwd entry (some containers)
        return str(Path.home())


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
) -> RunResult:
    """Run one action of a tool to completion and describe what happened.

    The timeout is `action.timeout_s`, else `timeout_s`, else 60 s; on expiry the whole process
    group is killed. `on_start(pid)` is called right after the spawn, `on_tick()` every `tick_s`
    while the tool runs (a worker renews its lease there). If a callback raises, the process
    group is killed and the exception propagates: that is the caller's failure, not the tool's.
    `caller_cwd`, when given, reaches the tool as `AAT_CALLER_CWD` so it can resolve relative
    paths the user typed (the tool's own cwd is its folder).
    """
    argv = build_argv(tool, action, args)
    env = build_env(tool, action, home=home, secrets=secrets, caller_cwd=caller_cwd)
    limit = action.timeout_s or timeout_s or DEFAULT_TIMEOUT_S
    problem = _missing_program(tool, argv[0], env["PATH"])
    if problem:
        return _not_started(problem)
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
        capture = _supervise(proc, limit, on_tick, tick_s, max_output_bytes)
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        _close(proc)
        raise
    return _classify(capture, proc, limit, time.monotonic() - started, max_output_bytes)


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


@dataclass
class _Capture:
    stdout: bytearray
    stderr: bytearray
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False


def _supervise(
    proc: subprocess.Popen[bytes],
    limit: float,
    on_tick: Callable[[], None] | None,
    tick_s: float,
    cap: int,
) -> _Capture:
    """Pump both pipes until the process group is gone, enforcing the timeout and ticking."""
    assert proc.stdout is not None and proc.stderr is not None
    capture = _Capture(bytearray(), bytearray())
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    now = time.monotonic()
    deadline, next_tick = now + limit, now + tick_s
    drain_until: float | None = None
    try:
        while True:
            now = time.monotonic()
            if drain_until is None and _has_exited(proc.pid):
                # Kill stragglers while the leader is an unreaped zombie: its pid (== the group
                # id) cannot be recycled yet, so killpg cannot hit an unrelated group.
                _kill_group(proc.pid)
                drain_until = now + _DRAIN_GRACE_S
            elif drain_until is None and now >= deadline:
                _kill_group(proc.pid)
                capture.timed_out = True
                deadline = float("inf")  # killed once; now wait for the exit to show
            if on_tick and now >= next_tick:
                on_tick()
                next_tick = max(next_tick + tick_s, now)
            if drain_until is not None and (not sel.get_map() or now >= drain_until):
                break
            wait = min(deadline, next_tick) - now if on_tick else deadline - now
            # Without open pipes select() only sleeps: poll the exit often so fast tools stay fast.
            wait = min(max(wait, 0.0), 0.05 if sel.get_map() else 0.005)
            for key, _ in sel.select(wait):
                _pump(sel, cast(IO[bytes], key.fileobj), key.data, capture, cap)
    finally:
        sel.close()
    proc.wait()
    _close(proc)
    return capture


def _pump(sel: selectors.BaseSelector, pipe: IO[bytes], name: str, cap: _Capture, n: int) -> None:
    chunk = os.read(pipe.fileno(), _READ_CHUNK)
    if not chunk:
        sel.unregister(pipe)
        return
    if name == "stdout":
        # Keep the head: a truncated object cannot be parsed anyway, the start shows what it was.
        room = n - len(cap.stdout)
        cap.stdout += chunk[: max(room, 0)]
        cap.stdout_truncated |= len(chunk) > room
    else:
        # Keep the tail: the last lines of stderr say why a tool died.
        cap.stderr += chunk
        if len(cap.stderr) > 2 * n:  # trim in batches, not on every chunk
            del cap.stderr[: len(cap.stderr) - n]
            cap.stderr_truncated = True


def _has_exited(pid: int) -> bool:
    """True once `pid` has exited, leaving it unreaped (WNOWAIT) so its pid stays reserved."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _close(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _classify(
    capture: _Capture, proc: subprocess.Popen[bytes], limit: float, duration: float, cap: int
) -> RunResult:
    stderr_truncated = capture.stderr_truncated or len(capture.stderr) > cap
    stderr_bytes = capture.stderr[-cap:] if stderr_truncated else capture.stderr
    stdout = capture.stdout.decode("utf-8", errors="replace")
    stderr = stderr_bytes.decode("utf-8", errors="replace")
    code = proc.returncode
    parsed = _json_object(stdout) if not capture.stdout_truncated else None

    def result(outcome: Outcome, error: str | None, exit_code: int | None = code) -> RunResult:
        return RunResult(
            outcome=outcome,
            exit_code=exit_code,
            result=parsed if outcome == "succeeded" else None,
            stdout=stdout,
            stderr=stderr,
            error=_one_line(error) if error else None,
            duration_s=duration,
            pid=proc.pid,
            stdout_truncated=capture.stdout_truncated,
            stderr_truncated=stderr_truncated,
        )

    if capture.timed_out:
        return result(
            "timed_out",
            f"timed out after {limit:g} s; raise timeout_s in the manifest or narrow the call",
            None,
        )
    why = _why(parsed, stderr)
    if code == 0:
        if capture.stdout_truncated:
            return result(
                "failed",
                f"tool printed more than {cap} bytes on stdout; narrow the call "
                "(e.g. a max-results argument) or have the tool write large output to a file",
            )
        if parsed is None:
            return result("failed", _not_json_error(stdout))
        return result("succeeded", None)
    if code == 2:
        return result("usage_error", f"exit 2 (usage error): {why}")
    if code < 0:
        return result("failed", f"killed by signal {_signal_name(-code)}: {why}")
    return result("failed", f"exit {code}: {why}")


def _why(parsed: dict[str, Any] | None, stderr: str) -> str:
    """The tool's own JSON "error", then the last stderr line unless it only repeats it."""
    tool_error = str(parsed["error"]) if parsed and parsed.get("error") else ""
    last = _last_line(stderr)
    if tool_error and tool_error in last:
        last = ""
    return "; ".join(x for x in (tool_error, last) if x) or "no message on stdout or stderr"


def _json_object(stdout: str) -> dict[str, Any] | None:
    try:
        value = json.loads(stdout)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _not_json_error(stdout: str) -> str:
    if not stdout.strip():
        return "tool printed nothing on stdout; it must print one JSON object"
    try:
        value = json.loads(stdout)
    except ValueError:
        head = stdout.strip()[:80]
        return (
            f"tool printed non-JSON output (first bytes: {head!r}); it must print one JSON object"
        )
    kind = type(value).__name__
    return f"tool printed JSON {kind}, not an object; it must print one JSON object"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _ERROR_MAX_CHARS else flat[: _ERROR_MAX_CHARS - 1] + "…"


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return str(number)
