"""The spawner: pre-forked interpreters (zygotes) that every confined call starts from.

Forking aat's own large, multi-threaded process for the Landlock step before exec cost several
milliseconds a call, and namespaces made per call cost more again. So each call is handed to a
small single-threaded zygote (`confine/zygote.py`) that entered the tools' namespaces once, as
it started (SPEC §17, `confine/namespaces.py`), and forks a child per call; the child narrows
those namespaces to the call, confines itself and runs the call. Two kinds of zygote share
this pool and this protocol (`confine/spawn_protocol.py`):

- the exec-mode zygote (`spawn`), one per interpreter and namespaces' network, preloads
  nothing and execs a plain call's argv, as `subprocess.Popen` would;
- a warm tool's own interpreter (`webplatform.process.warm`, SPEC §12), which has already
  imported the tool's module imports and runs its entrypoint in the child.

A zygote never holds aat's secrets or database handles: it is spawned with the interpreter's
environment variables only and no other descriptor than its control socket. Each call hands it
the call's stdin, stdout and stderr and a channel (`socket.send_fds`).

The go-ahead: a call's child, once forked and confined, waits before it runs anything of the
tool. While it is being prepared, the caller's `go_ahead()` runs (the job's row is written
there, so that write and the fork overlap); when it returns the child gets `GO`; when it raises
the child is dropped and exits having run nothing. That overlap is about a millisecond a call.

A zygote is started on the first call that needs it and replaced when it has died or its key
changed (an edited warm tool); a replaced one finishes its calls in flight, then exits.
`SpawnedProcess` is what `supervise` watches like a `Popen`: its pid leads its own session and
process group, its exit status comes from the zygote over the channel.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from webplatform.process.confine import spawn_protocol
from webplatform.process.confine.fence import NotStarted

ZYGOTE = Path(spawn_protocol.__file__).resolve().with_name("zygote.py")
# The exec-mode zygote's slot in the pool (a warm tool's slot is its folder).
EXEC_SLOT = "exec:"
# What the interpreter reads at start-up; the rest of a call's environment is set per call.
_INTERPRETER_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONIOENCODING", "PYTHONUNBUFFERED")
# The static view of a zygote's namespaces (see `confine.Jail.view`); None: no namespaces.
View = dict[str, Any] | None
# How long the last word of a killed call may take: the zygote reaps and reports at once.
_WAIT_BOUND_S = 10.0

# (slot, interpreter, manifest mtime, entrypoint mtime, the namespaces' static view as JSON)
Key = tuple[str, str, int, int, str]
# The caller's work that overlaps a call's start: it returns to let the call go ahead, or
# raises to drop it (see the module's docstring).
GoAhead = Callable[[], None]


def supported() -> bool:
    """Whether calls can start from zygotes here (Linux: fork, pidfds, descriptor passing)."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open")


class ZygoteGone(Exception):
    """The zygote died before the call reached it; a new one may take the call."""


@dataclass(frozen=True)
class Request:
    """One call as a zygote's child takes it on: its argv, whole environment and working
    folder, how it confines itself (`confine.Jail.request()`), the static view of the
    namespaces its zygote enters (`confine.Jail.view()`), and how long the zygote may take."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    confinement: dict[str, Any]
    view: View
    timeout_s: float
    # The read end of a pipe that is the call's stdin (a long-lived MCP server's, SPEC §22),
    # handed over and closed here; None: /dev/null, as for every tool call.
    stdin: int | None = None

    def line(self) -> bytes:
        request = {"argv": self.argv, "env": self.env, "cwd": str(self.cwd), **self.confinement}
        return spawn_protocol.line(request)


@dataclass(frozen=True)
class Zygote:
    """Which zygote takes a call: its place in the pool (`key`), how it is started (its
    working folder, the arguments after the interpreter) and how errors name it (`who`,
    and `broken`: what to say when it exits as soon as it starts)."""

    key: Key
    folder: Path
    args: list[str]
    who: str
    broken: str


class SpawnedProcess:
    """One call's process, as `supervise` and `classify` see it (like `subprocess.Popen`).

    `lost` is set when the zygote died during the call: its exit status is unknown.
    """

    def __init__(
        self, pid: int, stdout: IO[bytes], stderr: IO[bytes], channel: socket.socket, rest: bytes
    ) -> None:
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.stderr: IO[bytes] | None = stderr
        self.returncode: int | None = None
        self.lost = False
        # Set when an exec-mode call's program could not be executed (its OSError's text).
        self.exec_error: str | None = None
        # Set when the call was stopped for holding more than its limit of processes: the
        # name of that limit (`processes`), as the call's pid 1 reported it.
        self.limit: str | None = None
        self._channel: socket.socket | None = channel
        self._buffer = bytearray(rest)
        self._take_lines()

    @property
    def exit_fd(self) -> int | None:
        """Readable when the zygote reports (or dies); None once the exit is known."""
        return self._channel.fileno() if self._channel is not None else None

    def has_exited(self) -> bool:
        """True once the zygote reported the exit (or died); never blocks."""
        if self._channel is not None:
            self._read(0.0)
        return self._channel is None

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (negative: the signal), as `Popen.wait`; -9 when `lost` (unknown)."""
        deadline = time.monotonic() + (_WAIT_BOUND_S if timeout is None else timeout)
        while self._channel is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                self._close(lost=True)
                break
            self._read(left)
        assert self.returncode is not None
        return self.returncode

    def _read(self, timeout: float) -> None:
        assert self._channel is not None
        self._channel.settimeout(timeout)
        try:
            chunk = self._channel.recv(4096)
        except (BlockingIOError, TimeoutError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(lost=True)
            return
        self._buffer += chunk
        self._take_lines()

    def _take_lines(self) -> None:
        while b"\n" in self._buffer:
            line, _, rest = bytes(self._buffer).partition(b"\n")
            self._buffer = bytearray(rest)
            message = json.loads(line)
            if "exec_error" in message:
                self.exec_error = str(message["exec_error"])
            if "status" in message:
                self.limit = message.get("limit")
                self.returncode = os.waitstatus_to_exitcode(int(message["status"]))
                self._close(lost=False)
                return

    def _close(self, *, lost: bool) -> None:
        self.lost = lost
        if lost:  # unknown: the runner says what happened instead of an exit code
            self.returncode = -9
        if self._channel is not None:
            self._channel.close()
            self._channel = None


class _Running:
    """A started zygote: its process and the control socket calls are handed over."""

    def __init__(self, zygote: Zygote, env: dict[str, str]) -> None:
        self.key = zygote.key
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        view = [self.key[4]] if self.key[4] else []
        with theirs:
            self.proc = subprocess.Popen(
                [self.key[1], *zygote.args, str(theirs.fileno()), *view],
                cwd=zygote.folder,
                env={k: v for k, v in env.items() if k in _INTERPRETER_ENV},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def retire(self) -> None:
        """Close the control socket: the zygote finishes its calls in flight, then exits."""
        self.control.close()


class _Pool:
    """The running zygotes, one per slot: a warm tool's folder, or `exec:INTERPRETER`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._zygotes: dict[str, _Running] = {}
        self._retired: list[_Running] = []

    def get(self, zygote: Zygote, env: dict[str, str]) -> _Running:
        key = zygote.key
        with self._lock:
            self._retired = [z for z in self._retired if z.alive()]  # reaps those that exited
            running = self._zygotes.get(key[0])
            if running is not None and (running.key != key or not running.alive()):
                self._drop(running)
                running = None
            if running is None:
                running = self._zygotes[key[0]] = _Running(zygote, env)
            return running

    def discard(self, running: _Running) -> None:
        with self._lock:
            if self._zygotes.get(running.key[0]) is running:
                self._drop(running)

    def _drop(self, running: _Running) -> None:
        del self._zygotes[running.key[0]]
        running.retire()
        self._retired.append(running)

    def pid(self, slot: str) -> int | None:
        with self._lock:
            running = self._zygotes.get(slot)
            return running.proc.pid if running is not None and running.alive() else None

    def shutdown(self) -> None:
        with self._lock:
            zygotes = [*self._zygotes.values(), *self._retired]
            self._zygotes.clear()
            self._retired.clear()
        for running in zygotes:
            running.retire()
        for running in zygotes:  # idle ones exit at once; one still serving a call is stopped
            try:
                running.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                running.proc.kill()
                running.proc.wait()


_POOL = _Pool()
atexit.register(_POOL.shutdown)


def pid(slot: str) -> int | None:
    """The pid of the zygote in `slot` while one runs (for tests and diagnostics)."""
    return _POOL.pid(slot)


def spawner_pid(network: str = "own") -> int | None:
    """The pid of the spawner of plain calls in namespaces with `network` (`own`, `host`, or
    `none` without namespaces), while one runs (for tests and diagnostics)."""
    return _POOL.pid(f"{EXEC_SLOT}{sys.executable}:{network}")


def spawn(request: Request, go_ahead: GoAhead | None = None) -> SpawnedProcess:
    """Start a plain call's program through the exec-mode zygote; its process (`NotStarted`:
    why not).

    What the program starts with is what `subprocess.Popen` gives it (see zygote.py); a
    program that cannot be executed shows as the process's `exec_error`. `go_ahead` as in
    the module's docstring.
    """
    view = request.view
    net = view["net"] if view else "none"
    interpreter = sys.executable
    zygote = Zygote(
        key=(f"{EXEC_SLOT}{interpreter}:{net}", interpreter, 0, 0, view_json(view)),
        folder=Path("/"),
        args=["-S", str(ZYGOTE), spawn_protocol.EXEC_MODE],
        who="aat's spawner process",
        broken=f"aat's spawner process exits as soon as it starts; run `{interpreter} -S -c 0`",
    )
    return start(zygote, request, go_ahead)


def start(zygote: Zygote, request: Request, go_ahead: GoAhead | None) -> SpawnedProcess:
    """Start `request` from `zygote` (started, or replaced once if found dead); the call's
    process (`NotStarted`: a one-line reason). `go_ahead` runs once, even when the call is
    retried."""
    line = request.line()
    once = _once(go_ahead)
    for _ in range(2):  # a zygote found dead is replaced once
        running = _POOL.get(zygote, request.env)
        try:
            return _fork(running, (line, request.stdin), request.timeout_s, zygote.who, once)
        except ZygoteGone:
            _POOL.discard(running)
    raise NotStarted(zygote.broken)


def _fork(
    running: _Running, line: tuple[bytes, int | None], timeout_s: float, who: str, go_ahead: GoAhead
) -> SpawnedProcess:
    """Hand the call to the zygote; while its child forks and prepares, `go_ahead()`; then
    wait for the child's pid and give it the go-ahead. If `go_ahead` raises, the child is
    dropped (its channel closes: it exits having run nothing) and the exception propagates.
    Raises `NotStarted` when the zygote gives no child, `ZygoteGone` when it has died."""
    ours, out_r, err_r = _hand_over(running, line, timeout_s)
    try:
        go_ahead()
    except BaseException:
        _drop(ours, out_r, err_r)
        raise
    try:
        first = _first_message(ours)
        if "pid" in first[0]:
            ours.sendall(spawn_protocol.GO)
    except (OSError, ZygoteGone) as exc:
        _drop(ours, out_r, err_r)
        if isinstance(exc, TimeoutError):
            raise NotStarted(f"{who} did not answer within {timeout_s:g} s") from exc
        raise ZygoteGone from exc
    message, rest = first
    if "pid" not in message:
        _drop(ours, out_r, err_r)
        why = message.get("error") or f"wait status {message.get('status')}"
        raise NotStarted(f"{who} could not start the call ({why})")
    stdout, stderr = os.fdopen(out_r, "rb", buffering=0), os.fdopen(err_r, "rb", buffering=0)
    return SpawnedProcess(int(message["pid"]), stdout, stderr, ours, rest)


def _hand_over(
    running: _Running, request: tuple[bytes, int | None], timeout_s: float
) -> tuple[socket.socket, int, int]:
    """Send the call's descriptors and request (its line, and its stdin or None for
    /dev/null) to the zygote; our end of its channel and the read ends of its stdout and
    stderr. ZygoteGone when the zygote is not there to take it."""
    line, given = request
    stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC) if given is None else os.dup(given)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    ours, theirs = socket.socketpair()
    try:
        try:
            fds = [stdin, out_w, err_w, theirs.fileno()]
            socket.send_fds(running.control, [spawn_protocol.CALL], fds)
        finally:
            for fd in (stdin, out_w, err_w):
                os.close(fd)
            theirs.close()
        ours.settimeout(timeout_s)
        ours.sendall(line)
    except OSError as exc:
        _drop(ours, out_r, err_r)
        raise ZygoteGone from exc
    return ours, out_r, err_r


def _drop(ours: socket.socket, out_r: int, err_r: int) -> None:
    ours.close()
    os.close(out_r)
    os.close(err_r)


def view_json(view: View) -> str:
    """`view` as it is part of a zygote's key and its command line ("" for none)."""
    return "" if view is None else json.dumps(view, sort_keys=True)


def _once(go_ahead: GoAhead | None) -> GoAhead:
    """`go_ahead` made safe to reach twice (a call retried on a new zygote goes ahead once)."""
    done = go_ahead is None

    def once() -> None:
        nonlocal done
        if not done:
            assert go_ahead is not None
            go_ahead()
            done = True

    return once


def _first_message(channel: socket.socket) -> tuple[dict[str, Any], bytes]:
    data = bytearray()
    while b"\n" not in data:
        chunk = channel.recv(4096)
        if not chunk:
            raise ZygoteGone
        data += chunk
    line, _, rest = bytes(data).partition(b"\n")
    return json.loads(line), rest


def shutdown() -> None:
    """Let every zygote exit once its calls are done (also done at exit)."""
    _POOL.shutdown()
