"""Output classification: what a finished tool process's exit code and output amount to.

A tool that misbehaves (crashes, prints garbage, prints too much) yields a RunResult with a
one-line `error` that says how to fix it.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from typing import Any, Literal

from webplatform.process.supervise import Capture, Process
from webplatform.redaction import Redactor

# `lost`: an upstream MCP server's connection broke after the call was sent (SPEC §22).
Outcome = Literal["succeeded", "failed", "usage_error", "timed_out", "lost"]

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
    # Why the caller's folder was not offered to the tool (one line), when it was not.
    note: str | None = None

    @property
    def ok(self) -> bool:
        """True when the tool exited 0 and printed one JSON object."""
        return self.outcome == "succeeded"


def classify(
    capture: Capture,
    proc: Process,
    limit: float,
    duration: float,
    cap: int,
    redact: Redactor,
) -> RunResult:
    """The RunResult of a finished process; `redact` masks secrets before any text is cut."""
    # Mask first, cut after: a cut must never leave part of a secret to be seen.
    stderr_truncated = capture.stderr_truncated or len(capture.stderr) > cap
    raw_stdout = capture.stdout.decode("utf-8", errors="replace")
    parsed = _json_object(raw_stdout) if not capture.stdout_truncated else None
    stdout = redact.head(raw_stdout, cap, cut_before=capture.stdout_truncated)
    raw_stderr = capture.stderr.decode("utf-8", errors="replace")
    stderr = redact.tail(raw_stderr, cap, cut_before=capture.stderr_truncated)
    code = proc.returncode

    def result(outcome: Outcome, error: str | None, exit_code: int | None = code) -> RunResult:
        return RunResult(
            outcome=outcome,
            exit_code=exit_code,
            result=parsed if outcome == "succeeded" else None,
            stdout=stdout,
            stderr=stderr,
            error=redact.line(error, _ERROR_MAX_CHARS) if error else None,
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


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return str(number)
