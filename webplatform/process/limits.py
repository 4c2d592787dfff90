"""Why a call failed, when one of its `limits:` is the reason (SPEC §20).

A call's limits are held by the kernel: its processes by its PID namespace (whose pid 1 stops
it, and says so, when it holds more), its memory, file size and open files by resource
limits, its scratch folder by the size of the tmpfs it is. Only the first is reported by aat
itself; the others show as the tool's own failure: `MemoryError`, `File too large` (or the
signal SIGXFSZ), `No space left on device`, `Too many open files`. A failed call whose
output carries those words gets one more sentence naming the limit and how to raise it.
"""

from __future__ import annotations

import re
import signal

from webplatform.registry.model import ToolLimits

# What each limit's refusal looks like in a tool's stderr or error line, in the order checked.
_SIGNS = (
    (
        "processes",
        re.compile(
            r"can't start new thread|fork: retry|(?:fork|spawn|thread)[^\n]*(?:\n[^\n]*){0,2}?"
            r"(?:errno 11\b|resource temporarily unavailable)",
            re.IGNORECASE,
        ),
    ),
    (
        "memory_mb",
        re.compile(
            r"\bMemoryError\b|cannot allocate memory|out of memory|std::bad_alloc|errno 12\b",
            re.IGNORECASE,
        ),
    ),
    ("file_mb", re.compile(r"file too large|errno 27\b", re.IGNORECASE)),
    ("scratch", re.compile(r"no space left on device|errno 28\b", re.IGNORECASE)),
    ("open_files", re.compile(r"too many open files|errno 24\b", re.IGNORECASE)),
)
_SETTING = {
    "processes": "AAT_MAX_PROCESSES",
    "memory_mb": "AAT_MAX_MEMORY_MB",
    "file_mb": "AAT_MAX_FILE_MB",
    "open_files": "AAT_MAX_OPEN_FILES",
}


def hit(key: str, limits: ToolLimits) -> str:
    """The sentence naming the limit `key` (a `limits:` key, or `scratch`) the tool hit."""
    if key == "scratch":
        return (
            f"the tool filled its scratch folder (TMPDIR), which holds {limits.file_mb} MB "
            f"(limits.file_mb in its manifest; ceiling {_SETTING['file_mb']})"
        )
    what = {
        "processes": f"{limits.processes} processes and threads",
        "memory_mb": f"{limits.memory_mb} MB of memory",
        "file_mb": f"{limits.file_mb} MB per file",
        "open_files": f"{limits.open_files} open files",
    }[key]
    return (
        f"the tool hit its limit of {what} (limits.{key} in its manifest; ceiling {_SETTING[key]})"
    )


def explain(limits: ToolLimits, text: str, exit_code: int | None, *, scratch: bool) -> str | None:
    """The sentence to add to a failed call's error when `text` (its stderr and error) or
    its `exit_code` shows one of its `limits` refused it; else None. `scratch`: its scratch
    folder was a tmpfs of its own (else a full disk is the disk's, not a limit)."""
    if exit_code == -signal.SIGXFSZ:
        return hit("file_mb", limits)
    for key, sign in _SIGNS:
        if sign.search(text) and (scratch or key != "scratch"):
            return hit(key, limits)
    return None
