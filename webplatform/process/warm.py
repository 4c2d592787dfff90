"""Warm calls (SPEC §12): a `warm: true` python tool runs in a child forked from a warm interpreter.

One warm interpreter (`confine/zygote.py`) per tool, keyed by the tool's folder, the
interpreter, the mtimes of its manifest and entrypoint and the namespaces it runs in, so an
edited tool gets a new one on its next call (the old one finishes its calls in flight, then
exits). It is started on the first call, replaced when it has died, and never holds aat's
secrets or database handles: it is spawned with the interpreter's environment variables only
and no other descriptor than its control socket. It enters the tool's namespaces once, as it
starts (SPEC §17, `confine/namespaces.py`); each call's child only narrows them to the call.
Each call hands it the call's stdin, stdout and stderr and a channel (`socket.send_fds`); what
the tool can observe is what a plain spawn gives it (see zygote.py).

`start()` gives a `WarmProcess` that `supervise` watches like a `Popen`: its pid leads its own
session and process group, its exit status comes from the zygote over the channel.

`spawn()` starts a plain (`warm: false`) confined call the same way, through one zygote in
exec mode (per interpreter and namespaces' network) that preloads nothing and execs the
call's argv: forking aat's own large, multi-threaded process for the Landlock step before
exec cost several milliseconds a call, and namespaces made per call cost more again.
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
from pathlib import Path
from typing import IO, Any

from webplatform.process.confine import landlock
from webplatform.process.confine.fence import NotStarted
from webplatform.registry.model import ToolSpec

ZYGOTE = Path(landlock.__file__).resolve().with_name("zygote.py")
# The zygote's first argument for exec mode (plain calls), and its slot in the pool.
EXEC_MODE = "--exec"
EXEC_SLOT = "exec:"
# What the interpreter reads at start-up; the rest of a call's environment is set per call.
_INTERPRETER_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONIOENCODING", "PYTHONUNBUFFERED")
# The child's go-ahead (zygote.GO): its job row is written, it may start the tool.
GO = b"g"
# The static view of a zygote's namespaces (see `confine.Jail.view`); None: no namespaces.
View = dict[str, Any] | None
# How long the last word of a killed call may take: the zygote reaps and reports at once.
_WAIT_BOUND_S = 10.0

# (slot, interpreter, manifest mtime, entrypoint mtime, the namespaces' static view as JSON)
Key = tuple[str, str, int, int, str]


def supported() -> bool:
    """Whether calls can run warm here (Linux: fork, pidfds, descriptor passing)."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open")


class ZygoteGone(Exception):
    """The warm interpreter died before the call reached it; a new one may take the call."""


class WarmProcess:
    """One warm call's process, as `supervise` and `classify` see it (like `subprocess.Popen`).

    `lost` is set when the warm interpreter died during the call: its exit status is unknown.
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


class _Zygote:
    def __init__(self, key: Key, folder: Path, args: list[str], env: dict[str, str]) -> None:
        self.key = key
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        view = [key[4]] if key[4] else []
        with theirs:
            self.proc = subprocess.Popen(
                [key[1], *args, str(theirs.fileno()), *view],
                cwd=folder,
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
        self._zygotes: dict[str, _Zygote] = {}
        self._retired: list[_Zygote] = []

    def get(self, tool: ToolSpec, interpreter: str, env: dict[str, str], view: View) -> _Zygote:
        entry = tool.entrypoint_path
        key: Key = (
            _slot(tool, view),
            interpreter,
            tool.manifest_path.stat().st_mtime_ns if tool.manifest_path.exists() else 0,
            entry.stat().st_mtime_ns,
            _json(view),
        )
        return self._get(key, tool.folder, [str(ZYGOTE), str(entry)], env)

    def spawner(self, interpreter: str, env: dict[str, str], view: View) -> _Zygote:
        """The exec-mode zygote that spawns plain calls (one per interpreter and network)."""
        net = view["net"] if view else "none"
        key: Key = (f"{EXEC_SLOT}{interpreter}:{net}", interpreter, 0, 0, _json(view))
        return self._get(key, Path("/"), ["-S", str(ZYGOTE), EXEC_MODE], env)

    def _get(self, key: Key, folder: Path, args: list[str], env: dict[str, str]) -> _Zygote:
        with self._lock:
            self._retired = [z for z in self._retired if z.alive()]  # reaps those that exited
            zygote = self._zygotes.get(key[0])
            if zygote is not None and (zygote.key != key or not zygote.alive()):
                self._drop(zygote)
                zygote = None
            if zygote is None:
                zygote = self._zygotes[key[0]] = _Zygote(key, folder, args, env)
            return zygote

    def discard(self, zygote: _Zygote) -> None:
        with self._lock:
            if self._zygotes.get(zygote.key[0]) is zygote:
                self._drop(zygote)

    def _drop(self, zygote: _Zygote) -> None:
        del self._zygotes[zygote.key[0]]
        zygote.retire()
        self._retired.append(zygote)

    def pid(self, slot: str) -> int | None:
        with self._lock:
            zygote = self._zygotes.get(slot)
            return zygote.proc.pid if zygote is not None and zygote.alive() else None

    def shutdown(self) -> None:
        with self._lock:
            zygotes = [*self._zygotes.values(), *self._retired]
            self._zygotes.clear()
            self._retired.clear()
        for zygote in zygotes:
            zygote.retire()
        for zygote in zygotes:  # idle ones exit at once; one still serving a call is stopped
            try:
                zygote.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                zygote.proc.kill()
                zygote.proc.wait()


_POOL = _Pool()
atexit.register(_POOL.shutdown)


def _slot(tool: ToolSpec, view: View) -> str:
    """A warm interpreter's place in the pool: its tool's folder, and its namespaces' network
    (`own`, `host`; `none` without namespaces)."""
    return f"{tool.folder}:{view['net'] if view else 'none'}"


def zygote_pid(tool: ToolSpec, network: str | None = None) -> int | None:
    """The pid of `tool`'s warm interpreter while one runs (for tests and diagnostics), in
    namespaces with `network` (by default the one its `network:` gets)."""
    net = network or ("own" if tool.network.none else "host")
    return _POOL.pid(f"{tool.folder}:{net}")


def spawner_pid(network: str = "own") -> int | None:
    """The pid of the spawner of plain calls in namespaces with `network` (`own`, `host`, or
    `none` without namespaces), while one runs (for tests and diagnostics)."""
    return _POOL.pid(f"{EXEC_SLOT}{sys.executable}:{network}")


def start(
    tool: ToolSpec,
    argv: list[str],
    env: dict[str, str],
    confinement: dict[str, Any],
    *,
    view: View,
    timeout_s: float,
    admit: Callable[[], None] | None = None,
) -> WarmProcess:
    """Start one call of `tool` in its warm interpreter; the call's process (`NotStarted`:
    a one-line reason it could not start).

    `argv` is the plain call's (`python ENTRYPOINT ACTION ...`), `env` its whole environment,
    `confinement` how its child confines itself (`Jail.request()`), `view` the static view of
    the namespaces the warm interpreter enters (`Jail.view()`; None: none). `admit()` runs
    while the child is forked and prepared, before it runs anything of the tool (see
    `runner.run`).
    """
    request = {"argv": argv, "env": env, "cwd": str(tool.folder), **confinement}
    line = json.dumps(request, ensure_ascii=False).encode() + b"\n"
    admit = _once(admit)
    for _ in range(2):  # a zygote found dead is replaced once
        zygote = _POOL.get(tool, argv[0], env, view)
        try:
            return _fork(zygote, line, timeout_s, f"the warm interpreter of {tool.name}", admit)
        except ZygoteGone:
            _POOL.discard(zygote)
    raise NotStarted(
        f"the warm interpreter of {tool.name} exits as soon as it starts; "
        f"run `{argv[0]} {argv[1]}` to see why, or set `warm: false` in its manifest"
    )


def spawn(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    confinement: dict[str, Any],
    *,
    view: View,
    timeout_s: float,
    admit: Callable[[], None] | None = None,
) -> WarmProcess:
    """Start a plain call's program through the exec-mode zygote; its process (`NotStarted`:
    why not).

    What the program starts with is what `subprocess.Popen` gives it (see zygote.py); a
    program that cannot be executed shows as the process's `exec_error`. `confinement`,
    `view` and `admit` as for `start`.
    """
    request = {"argv": argv, "env": env, "cwd": str(cwd), **confinement}
    line = json.dumps(request, ensure_ascii=False).encode() + b"\n"
    admit = _once(admit)
    for _ in range(2):  # a spawner found dead is replaced once
        zygote = _POOL.spawner(sys.executable, env, view)
        try:
            return _fork(zygote, line, timeout_s, "aat's spawner process", admit)
        except ZygoteGone:
            _POOL.discard(zygote)
    raise NotStarted(
        f"aat's spawner process exits as soon as it starts; run `{sys.executable} -S -c 0`"
    )


def _fork(
    zygote: _Zygote, line: bytes, timeout_s: float, who: str, admit: Callable[[], None]
) -> WarmProcess:
    """Hand the call to `zygote`; while its child forks and prepares, `admit()`; then wait for
    the child's pid and give it the go-ahead. If `admit` raises, the child is dropped (its
    channel closes: it exits having run nothing) and the exception propagates. Raises
    `NotStarted` when the zygote gives no child, `ZygoteGone` when it has died."""
    stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    ours, theirs = socket.socketpair()

    def drop() -> None:
        ours.close()
        os.close(out_r)
        os.close(err_r)

    try:
        try:
            socket.send_fds(zygote.control, [b"c"], [stdin, out_w, err_w, theirs.fileno()])
        finally:
            for fd in (stdin, out_w, err_w):
                os.close(fd)
            theirs.close()
        ours.settimeout(timeout_s)
        ours.sendall(line)
    except OSError as exc:
        drop()
        raise ZygoteGone from exc
    try:
        admit()
    except BaseException:
        drop()
        raise
    try:
        first = _first_message(ours)
        if "pid" in first[0]:
            ours.sendall(GO)
    except (OSError, ZygoteGone) as exc:
        drop()
        if isinstance(exc, TimeoutError):
            raise NotStarted(f"{who} did not answer within {timeout_s:g} s") from exc
        raise ZygoteGone from exc
    message, rest = first
    if "pid" not in message:
        drop()
        why = message.get("error") or f"wait status {message.get('status')}"
        raise NotStarted(f"{who} could not start the call ({why})")
    stdout, stderr = os.fdopen(out_r, "rb", buffering=0), os.fdopen(err_r, "rb", buffering=0)
    return WarmProcess(int(message["pid"]), stdout, stderr, ours, rest)


def _json(view: View) -> str:
    return "" if view is None else json.dumps(view, sort_keys=True)


def _once(admit: Callable[[], None] | None) -> Callable[[], None]:
    """`admit` made safe to reach twice (a call retried on a new zygote is admitted once)."""
    done = admit is None

    def once() -> None:
        nonlocal done
        if not done:
            assert admit is not None
            admit()
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
    """Let every warm interpreter exit once its calls are done (also done at exit)."""
    _POOL.shutdown()
