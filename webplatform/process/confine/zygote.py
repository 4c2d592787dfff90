"""A zygote of aat's spawner (`webplatform.process.spawner`): it forks a fresh child per call.

This file imports only the standard library and `landlock.py`, `namespaces.py` and
`spawn_protocol.py` beside it (what it and the spawner say to each other is defined there).
The spawner starts it with the interpreter and environment variables a plain call starts the
tool with, minus everything that belongs to one call (no secrets, no `AAT_*`), either as the
warm interpreter of one `warm: true` tool (SPEC §12) or in exec mode for plain calls:

    python zygote.py ENTRYPOINT CONTROL_FD [VIEW]
    python -S zygote.py --exec CONTROL_FD [VIEW]

It holds nothing of aat's (no database, no keys, no settings: its only open descriptor is the
control socket) and is not confined by Landlock itself, because Landlock can only ever narrow:
each call's child gets the call's own rules, which differ call by call (scratch folder,
caller's workspace). Given a VIEW (JSON: the static paths, and the network), it first enters
the tools' namespaces (`namespaces.enter`: user, mount and, for `network: none`, network; SPEC
§17), once, so no call pays for making them; a warm interpreter then pre-imports, inside them,
the standard-library and third-party modules the entrypoint imports (never the tool's own
modules). It serves calls on one thread (fork safety). Namespaces it could not enter make it
answer every call with why, and fork nothing.

One call (`spawn_protocol`): the zygote receives the call's stdin, stdout, stderr and channel
on CONTROL_FD and forks; in namespaces, into a PID namespace of its own (SPEC §20), whose
pid 1 the child is. The child reads the request `{"argv", "env", "cwd", "paths", "own",
"landlock", "net", "limits"}` (one JSON line) from the channel, starts its own session (so
its process group is its own and is killed on timeout), wires the three descriptors to
0/1/2, takes the call's environment, answers `{"pid": N}` (as aat sees it), closes every
other descriptor (the control socket, other calls' channels) and confines itself: in
namespaces, a mount namespace of its own with the call's `own` paths bound, its own `/proc`
and a scratch tmpfs (`namespaces.narrow`), then the call's working folder and its `limits`
as resource limits. As pid 1 it then forks the process that becomes the tool and stays
behind (`_split`): it reaps, ends the call when the tool exits or holds more processes than
its limit, and reports the tool's wait status itself (a pid 1 cannot die of a signal it
sends itself, so the tool must not be pid 1). The tool's process applies Landlock's rules
for `paths` (and `net`, its TCP ports) when `landlock` says so (without namespaces, the child
itself does). It then waits for the go-ahead (`GO`), which the spawner sends once the
caller's work for the call (the job's row) is done: that work and the fork overlap, and a
call dropped meanwhile ends here having run nothing. A warm interpreter's child then runs
the entrypoint with `runpy.run_path` as `__main__`, so module globals start fresh every
call; exceptions, `sys.exit` and interpreter shutdown (non-daemon threads joined, atexit
handlers) are the interpreter's own. An exec-mode child execs the call's argv with the
call's environment, as `subprocess.Popen` would have; an exec that fails is reported as
`{"exec_error": ...}`.

The zygote waits on each child with a pidfd; when it exits it kills the child's process group
(while the child is an unreaped zombie, so the group id cannot be reused), reaps it and writes
`{"status": WAIT_STATUS}` on the channel (after the tool's own, which its pid 1 sent, and
which the spawner takes). The zygote reports the status, not the spawner through a pidfd of
its own, because only a process's parent can read its wait status. When the control
socket closes, the zygote finishes its calls in flight and exits.
"""

from __future__ import annotations

import ast
import atexit  # noqa: F401 - its exit functions are run by `_finish`
import contextlib
import gc
import importlib
import importlib.util
import json
import os
import re
import resource
import runpy
import select
import selectors
import signal
import socket
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from webplatform.process.confine import landlock, namespaces, spawn_protocol
else:  # run as a script: the sibling files, without importing aat
    import landlock
    import namespaces
    import spawn_protocol

    # A tool may have its own `landlock.py`: keep ours out of the module table it will see.
    del sys.modules["landlock"], sys.modules["namespaces"], sys.modules["spawn_protocol"]

EXIT_NOT_CONFINED = landlock.EXIT_NOT_CONFINED
# What this zygote's namespaces hold for its calls (`namespaces.Views`; None: it entered none).
Static = tuple[list[tuple[str, str, str]], int] | None


# The standard library's own folder: its modules' lazy imports are warmed too (`preimport`).
STDLIB = os.path.dirname(os.__file__) + os.sep
# An import statement inside a function (or any indented block) of a module's source.
_LAZY_IMPORT = re.compile(rb"^[ \t]+(?:import|from)[ \t]+([A-Za-z_][\w.]*)", re.M)
# Standard modules whose import does something (opens a browser, prints, starts Tk).
_NEVER_WARM = frozenset({"antigravity", "this", "__main__", "idlelib", "tkinter", "turtle"})


def preimport(entry: str, folder: str) -> None:
    """Import what `entry` imports, except modules found in the tool's own folder; then what
    the standard library's modules among those import lazily, inside their functions (and
    what `runpy` does to run the entrypoint), which each call's child would otherwise import
    afresh: argparse's `shutil` on every parse, runpy's `pkgutil` on every run."""
    try:
        with open(entry, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return  # the child will meet the same problem and report it as a plain run would
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    own = os.path.realpath(folder) + os.sep
    before = set(sys.modules)
    _import_all(names, own)
    loaded = [sys.modules[n] for n in set(sys.modules) - before] + [runpy]
    _import_all(_lazy_imports(loaded), own, stdlib_only=True)
    for name, module in list(sys.modules.items()):  # pulled in indirectly from the folder
        path = getattr(module, "__file__", None)
        if path and os.path.realpath(path).startswith(own):
            del sys.modules[name]


def _import_all(names: list[str], own: str, *, stdlib_only: bool = False) -> None:
    """Import each of `names` not found in the tool's folder `own` (with `stdlib_only`, only
    the standard library's); one that will not import is just not warm."""
    for name in dict.fromkeys(names):
        top = name.split(".")[0]
        if top in ("__future__", *_NEVER_WARM) or name in sys.modules:
            continue
        try:
            spec = importlib.util.find_spec(top)
            origin = spec.origin if spec else None
            if not origin or os.path.realpath(origin).startswith(own):
                continue
            if stdlib_only and not _in_stdlib(origin):
                continue
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that will not import is just not warm
            continue


def _in_stdlib(path: str) -> bool:
    return path.startswith(STDLIB) and "site-packages" not in path


def _lazy_imports(modules: list[Any]) -> list[str]:
    """The modules the standard library's `modules` import in indented blocks (functions,
    mostly), read from their source text: one pass, not the imports of those in turn."""
    found: list[str] = []
    for module in modules:
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py") or not _in_stdlib(path):
            continue
        try:
            with open(path, "rb") as f:
                found += [m.decode() for m in _LAZY_IMPORT.findall(f.read())]
        except (OSError, UnicodeDecodeError):
            continue
    return found


def serve(
    control: socket.socket, refusal: str | None = None, *, own_pids: bool = False
) -> tuple[socket.socket, list[int]] | None:
    """Fork a child per call until the control socket closes; in a child, return its call.

    With a `refusal` (the namespaces could not be entered), each call is answered with it
    and nothing is forked. With `own_pids`, each child is pid 1 of a PID namespace of its
    own, forked ahead of its call (`_prepare`): making the namespace and copying this process
    then overlap the wait for the next call, not the call.
    """
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ, None)
    accepting, running = True, 0
    spare: Spare | None = None
    while accepting or running:
        if own_pids and accepting and spare is None and refusal is None:
            spare, call = _prepare(sel, control)
            if call is not None:  # in the spare child, once its call came
                return call
        for key, _ in sel.select():
            if key.data is not None:
                _report(sel, key)
                running -= 1
                continue
            fds = _receive(control)
            if fds is None:
                sel.unregister(control)
                control.close()
                _dismiss(spare)
                accepting, spare = False, None
                continue
            channel = socket.socket(fileno=fds[3])
            pid, spare = _hand(spare, fds), None
            if pid is None:
                pid = _fork(channel, refusal, own_pids)
            if pid == 0:  # the child keeps nothing of the zygote's or of other calls
                _leave(sel, control)
                return channel, fds[:3]
            for fd in fds[:3]:
                os.close(fd)
            if pid < 0:
                channel.close()
                continue
            sel.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, channel))
            running += 1
    return None


# A child forked ahead of its call, and the socket its call's descriptors will come on.
Spare = tuple[int, socket.socket]


def _prepare(
    sel: selectors.BaseSelector, control: socket.socket
) -> tuple[Spare | None, tuple[socket.socket, list[int]] | None]:
    """Fork the next call's child into a PID namespace of its own, now: the spare (None when
    the kernel refused; the call then forks its own), or, in the child, its call once it
    came (a child whose socket closes without one exits, having run nothing)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = namespaces.fork_own_pids()
    except OSError:
        ours.close()
        theirs.close()
        return None, None
    if pid != 0:
        theirs.close()
        return (pid, ours), None
    ours.close()
    _leave(sel, control)
    fds = _receive(theirs)
    theirs.close()
    if fds is None:
        os._exit(0)
    return None, (socket.socket(fileno=fds[3]), fds[:3])


def _hand(spare: Spare | None, fds: list[int]) -> int | None:
    """Give the call's descriptors to the spare; its pid, or None when there is no spare
    (or it has died: it is reaped)."""
    if spare is None:
        return None
    pid, sock = spare
    try:
        socket.send_fds(sock, [spawn_protocol.CALL], fds)
    except OSError:
        _dismiss(spare)
        return None
    sock.close()
    return pid


def _dismiss(spare: Spare | None) -> None:
    """Close the spare's socket, which ends it, and reap it."""
    if spare is not None:
        pid, sock = spare
        sock.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _receive(control: socket.socket) -> list[int] | None:
    """The next call's descriptors (stdin, stdout, stderr, channel); None once the runner
    closed the control socket (or sent something else)."""
    try:
        _, fds, _, _ = socket.recv_fds(control, 16, spawn_protocol.CALL_FDS)
    except OSError:
        fds = []
    if len(fds) == spawn_protocol.CALL_FDS:
        return fds
    for fd in fds:
        os.close(fd)
    return None


def _fork(channel: socket.socket, refusal: str | None, own_pids: bool) -> int:
    """`os.fork()` (with `own_pids`, into a PID namespace of its own), or -1 with why not
    said on the call's channel."""
    try:
        if refusal is not None:
            raise OSError(0, refusal)
        return namespaces.fork_own_pids() if own_pids else os.fork()
    except OSError as exc:
        why = refusal or f"fork: {exc.strerror}"
        with contextlib.suppress(OSError):
            channel.sendall(spawn_protocol.line({"error": why}))
        return -1


def _leave(sel: selectors.BaseSelector, control: socket.socket) -> None:
    """In a new child: close the zygote's control socket and the other calls' descriptors."""
    for other in sel.get_map().values():
        if other.data is not None:
            other.data[1].close()
            os.close(other.fd)
    sel.close()
    control.close()


def _report(sel: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
    """A child exited: kill its process group, reap it and report its wait status."""
    pid, channel = key.data
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):
        channel.sendall(spawn_protocol.line({"status": status}))
    channel.close()
    sel.unregister(key.fd)
    os.close(key.fd)


def become(channel: socket.socket, stdio: list[int], static: Static) -> str:
    """In the forked child: take on the call (session, stdio, env, confinement); the entrypoint."""
    request = _read_request(channel)
    os.environ.clear()
    os.environ.update(request["env"])
    _take_on(channel, stdio)
    _close_all_but(channel, static)
    _confine(request, static)
    _split(channel, request)
    _await_go(channel)
    channel.close()
    argv = request["argv"]
    sys.argv = list(argv[1:])
    sys.path[0] = os.path.dirname(argv[1])
    if "tempfile" in sys.modules:  # it caches the zygote's TMPDIR; the call has its own
        vars(sys.modules["tempfile"])["tempdir"] = None
    return str(argv[1])


def execute(channel: socket.socket, stdio: list[int], static: Static) -> None:
    """In the forked child of an exec-mode zygote: take on the call, then exec its argv.

    What the new program starts with is what `subprocess.Popen(argv, env=..., cwd=...,
    start_new_session=True, close_fds=True, restore_signals=True)` would give it. Only the
    channel stays open until the exec (close-on-exec), to report an exec that fails.
    """
    request = _read_request(channel)
    _take_on(channel, stdio)
    os.set_inheritable(channel.fileno(), False)
    _close_all_but(channel, static)
    _confine(request, static)
    _split(channel, request)
    for name in ("SIGPIPE", "SIGXFSZ"):  # what the interpreter ignores, as Popen restores
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    _await_go(channel)
    argv = request["argv"]
    try:
        os.execvpe(argv[0], argv, request["env"])
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte inside an argument
        with contextlib.suppress(OSError):
            channel.sendall(spawn_protocol.line({"exec_error": str(exc)}))
    os._exit(127)


def _take_on(channel: socket.socket, stdio: list[int]) -> None:
    """Its own session and the call's stdio; then tell the runner its pid (as the runner
    sees it: the host's /proc is still this process's /proc)."""
    os.setsid()
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
        os.close(fd)
    try:
        pid = int(os.readlink("/proc/self"))
    except (OSError, ValueError):
        pid = os.getpid()
    channel.sendall(spawn_protocol.line({"pid": pid}))


def _close_all_but(channel: socket.socket, static: Static) -> None:
    """Close every descriptor but stdio, the channel and the tools' namespace (which
    `namespaces.narrow` closes once it has moved into it)."""
    kept = sorted({channel.fileno(), *([static[1]] if static is not None else [])})
    low = 3
    for fd in kept:
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _await_go(channel: socket.socket) -> None:
    """Wait, confined, for the runner's go-ahead (one byte): it writes the job's row first.

    Anything else (the runner gone, the call dropped because its row was not written) ends
    the child before any of the tool runs.
    """
    try:
        go = channel.recv(1)
    except OSError:
        go = b""
    if go != spawn_protocol.GO:
        os._exit(spawn_protocol.EXIT_DROPPED)


def _confine(request: dict[str, Any], static: Static) -> None:
    """The call's own view of the files (in namespaces, with its own /proc and scratch
    space), its working folder and its limits; then, unless it is pid 1 of its namespace
    (which confines the tool's process once forked, `_split`), its Landlock rules. A child
    that cannot have them all exits 126, having run nothing of the tool."""
    none: dict[str, list[str]] = {"read": [], "write": []}
    own = request["own"] or none
    limits = request.get("limits") or {}
    try:
        if static is not None:
            bounds = {**limits, "scratch_mb": limits.get("file_mb")}
            namespaces.narrow(static, list(own["read"]), list(own["write"]), bounds)
        os.chdir(request["cwd"])
        _set_limits(limits)
        if os.getpid() != 1:
            _restrict(request)
    except OSError as exc:
        _not_confined(exc)


def _restrict(request: dict[str, Any]) -> None:
    """Landlock's rules for the call (when it asks for them); raises OSError."""
    paths = request["paths"] or {"read": [], "write": []}
    if request["landlock"]:
        landlock.restrict(list(paths["read"]), list(paths["write"]), request["net"])


def _not_confined(exc: OSError) -> NoReturn:
    sys.stderr.write(f"aat: the tool was not run: confinement failed ({exc.strerror})\n")
    sys.stderr.flush()
    os._exit(EXIT_NOT_CONFINED)


# Each of a call's `limits` (SPEC §20) as the resource limits that hold it, and their unit.
_RLIMITS = {
    "memory_mb": (resource.RLIMIT_DATA, 1 << 20),
    "file_mb": (resource.RLIMIT_FSIZE, 1 << 20),
    "open_files": (resource.RLIMIT_NOFILE, 1),
}


def _set_limits(limits: dict[str, int]) -> None:
    """The call's memory, file size and open files as resource limits, soft and hard, so the
    tool cannot raise them. (Its processes are held by its PID namespace: `_split`.)"""
    for key, (which, unit) in _RLIMITS.items():
        value = limits.get(key)
        if isinstance(value, int):
            cap = value * unit
            hard = resource.getrlimit(which)[1]
            if hard != resource.RLIM_INFINITY:
                cap = min(cap, hard)
            resource.setrlimit(which, (cap, cap))


# How often pid 1 of a call's namespace counts its processes.
_COUNT_EVERY_S = 0.05


def _split(channel: socket.socket, request: dict[str, Any]) -> None:
    """As pid 1 of the call's own PID namespace: fork the process that becomes the tool,
    which returns from here confined by Landlock, and stay behind as the namespace's init
    (`_stand_by`). Not pid 1 (no namespaces): return at once."""
    if os.getpid() != 1:
        return
    try:
        tool = os.fork()
    except OSError as exc:
        _not_confined(exc)
    if tool == 0:
        os.setsid()  # the tool leads its own session and group, as without a namespace
        try:
            _restrict(request)
        except OSError as exc:
            _not_confined(exc)
        return
    processes = (request.get("limits") or {}).get("processes")
    _stand_by(channel, tool, processes if isinstance(processes, int) else None)


def _stand_by(channel: socket.socket, tool: int, processes: int | None) -> NoReturn:
    """Pid 1 of a call's namespace: reap what its processes leave behind, and end the call
    (every process in the namespace ends with pid 1) when the tool exits, reporting its
    wait status, or when it holds more than `processes` processes and threads at once,
    saying so. A pid 1 cannot end by a signal of its own, so it reports the tool's status
    on the channel itself before the zygote reports its own."""
    for fd in (0, 1, 2):
        os.close(fd)
    try:
        watch = [os.pidfd_open(tool)]
    except OSError:  # (no descriptor left under a tiny limits.open_files): counting wakes it
        watch = []
    while True:
        status = _reap(tool)
        if status is not None:
            _last_word(channel, {"status": status})
        if processes is not None and _threads() > processes:
            _last_word(channel, {"status": signal.SIGKILL, "limit": "processes"})
        select.select(watch, [], [], _COUNT_EVERY_S)


def _reap(tool: int) -> int | None:
    """Reap every process that has ended; the tool's wait status once it has."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 0
        if pid == 0:
            return None
        if pid == tool:
            return status


def _threads() -> int:
    """The processes and threads in this namespace but pid 1 (each holds a pid)."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit() and name != "1":
            with contextlib.suppress(OSError):
                count += len(os.listdir(f"/proc/{name}/task"))
    return count


def _last_word(channel: socket.socket, message: dict[str, Any]) -> NoReturn:
    with contextlib.suppress(OSError):
        channel.sendall(spawn_protocol.line(message))
    os._exit(0)


def _read_request(channel: socket.socket) -> dict[str, Any]:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = channel.recv(65536)
        if not chunk or len(data) > spawn_protocol.MAX_REQUEST:
            os._exit(EXIT_NOT_CONFINED)  # the runner went away before sending the call
        data += chunk
    value: dict[str, Any] = json.loads(data)
    return value


def enter(view: dict[str, Any] | None) -> tuple[Static, str | None]:
    """Enter the namespaces `view` asks for (None: none); the static view, or why not."""
    if view is None:
        return None, None
    try:
        return namespaces.enter(view), None
    except OSError as exc:
        return None, f"namespaces for tools could not be made ({exc.strerror or exc})"


def main() -> None:
    entry, control_fd = sys.argv[1], int(sys.argv[2])
    static, refusal = enter(json.loads(sys.argv[3]) if len(sys.argv) > 3 else None)
    control = socket.socket(fileno=control_fd)
    own_pids = static is not None
    if entry == spawn_protocol.EXEC_MODE:
        call = serve(control, refusal, own_pids=own_pids)
        if call is None:
            sys.exit(0)
        execute(*call, static)
    folder = os.path.dirname(entry)
    sys.path[0] = folder  # as for `python ENTRYPOINT`, not this file's folder
    if static is not None:
        os.chdir(folder)  # the namespaces moved the root away from the one it started in
    if refusal is None:  # the tool's imports run in the namespaces, never without them
        preimport(entry, folder)
    gc.collect()
    gc.freeze()  # children then share the pre-imported objects' pages longer
    call = serve(control, refusal, own_pids=own_pids)
    if call is None:
        sys.exit(0)
    code = run(become(*call, static))
    if code < 0:  # an uncaught KeyboardInterrupt ends the interpreter by SIGINT
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def run(path: str) -> int:
    """Run the entrypoint as `python PATH` would and end as its interpreter would; the exit code.

    The child then leaves with `os._exit`: a full interpreter teardown in a forked child would
    write to every inherited object (reference counts, the collector) and so copy the whole
    warm heap page by page, which costs more than the call. What a tool can observe of the end
    is kept: the exit code of `sys.exit`, the traceback of an uncaught exception (from the
    entrypoint's own frame on, as the plain interpreter prints it), non-daemon threads joined,
    atexit handlers run, stdout and stderr flushed.
    """
    try:
        runpy.run_path(path, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException as exc:  # noqa: BLE001 - what the interpreter does with it, below
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        if tb is not None:  # the hook prints the exception's own traceback
            exc.__traceback__ = tb
        sys.excepthook(type(exc), exc, exc.__traceback__)
        code = -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1
    return _finish(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{code}\n")
    return 1


def _finish(code: int) -> int:
    """The interpreter's own shutdown steps that a tool can see, without tearing the heap down."""
    threading = sys.modules.get("threading")
    if threading is not None:
        with contextlib.suppress(BaseException):
            getattr(threading, "_shutdown")()  # noqa: B009 - joins non-daemon threads
    with contextlib.suppress(BaseException):
        getattr(sys.modules["atexit"], "_run_exitfuncs")()  # noqa: B009
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            code = code or 120  # as the interpreter reports a failed flush at exit
    return code


if __name__ == "__main__":
    main()
