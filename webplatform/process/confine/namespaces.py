"""User, mount and network namespaces for tool processes (SPEC §17), set up once per spawner.

This file imports only the standard library: the zygote (`zygote.py`) loads it as a sibling
script, without aat, as it loads `landlock.py`.

Creating namespaces costs milliseconds (a network namespace most of all), so a zygote enters
them once, when it starts (`enter`), and each call's forked child inherits them; the child
only adds what differs call by call (`narrow`). What the zygote sets up:

- a user namespace that maps aat's uid and gid to themselves, so files keep their owners;
- with `net: own`, a network namespace of its own: no network but its own loopback (brought
  up here); abstract Unix sockets live in the network namespace, so the host's are gone too;
- a mount namespace whose root is a fresh, read-only tmpfs holding only the static view:
  the system and interpreter paths every tool reads, the few device files, `/proc`, and each
  host top-level folder as an empty folder or the same symlink; nothing else of the host
  (aat's home, /run with its sockets, /tmp, the home folders) is there.

The zygote keeps two mount namespaces: its own, where the host's tree stays at `HOST` for the
calls to clone their paths from, and the tools' one, the same view without `HOST`, which it
made once (`Views`). A call's child (`narrow`) clones its own paths (its tool folder,
workspaces, scratch folder, declared `reads:` and `writes:`; read-only unless written) from
`HOST` as detached mounts, moves into a copy of the tools' namespace and attaches them there
at the same paths, then drops every capability: it runs as aat's user with no privilege in
any namespace, and never had the host's tree in its namespace at all. A path under a host
top-level folder that holds no static path (say /tmp or /home) is made on a fresh tmpfs
mounted over that folder for this call alone, so no call leaves a trace another call could
see; the static paths under such a folder (an interpreter in /home) are attached again there.
Landlock (`landlock.py`) stays the second wall and also forbids the tool any mount.

Each call's child is also pid 1 of a PID namespace of its own (`fork_own_pids`, SPEC §20):
it mounts that namespace's `/proc` over the host's, caps the pids the namespace hands out
at its process limit, and mounts a tmpfs of the call's size over its scratch folder
(`bound`); every process in the namespace ends when it does.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import platform
import signal
import socket
import struct
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
CLONE_NEWPID = 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 1 << 12, 1 << 14, 1 << 18
_MNT_DETACH = 2
_AT_FDCWD, _AT_RECURSIVE, _AT_EMPTY_PATH = -100, 0x8000, 0x1000
_MOUNT_ATTR_RDONLY = 1
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC, _MOVE_MOUNT_F_EMPTY_PATH = 1, os.O_CLOEXEC, 4
# The generic numbers, the same on x86_64 and aarch64 (Linux 5.2 and 5.12).
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine(), -1)
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(platform.machine(), -1)
# The kernel hands out pids from 300 up once the counter has passed it (RESERVED_PIDS), and a
# namespace's pid_max may not be set below 301: a call's namespace gets pids 300 to
# 300 + its limit, that many and one more (see `_pid_cap`).
_RESERVED_PIDS = 300
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_DUMPABLE = 1, 24, 4
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
# Where the host's tree stays inside the zygote's mount namespace (never in a tool's).
HOST = "/.aat-host"
_TMPFS = "mode=0755,size=1m,nr_inodes=4096"
# A path's mode in a view.
READ, WRITE = "read", "write"
# Device files and /proc links a runtime expects besides the bound device files.
_DEV_LINKS = {
    "/dev/fd": "/proc/self/fd",
    "/dev/stdin": "/proc/self/fd/0",
    "/dev/stdout": "/proc/self/fd/1",
    "/dev/stderr": "/proc/self/fd/2",
}

Entry = tuple[str, str, str]  # ("bind", view path, mode) or ("link", view path, target)
# What a zygote holds for its calls: the static view's entries, and a descriptor of the tools'
# mount namespace (the static view without the host's tree).
Views = tuple[list[Entry], int]


class _Lib:
    """The C library calls used here, resolved once (a forked child must not dlopen)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        self.libc = libc
        self.api = ctypes.pythonapi

    def check(self, result: int, what: str) -> None:
        if result < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def unshare(self, flags: int) -> None:
        self.check(self.libc.unshare(ctypes.c_int(flags)), "unshare")

    def mount(
        self,
        source: str | None,
        target: str,
        fstype: str | None,
        flags: int,
        data: str | None = None,
    ) -> None:
        self.check(
            self.libc.mount(
                source and os.fsencode(source),
                os.fsencode(target),
                fstype and fstype.encode(),
                ctypes.c_ulong(flags),
                data and data.encode(),
            ),
            f"mount {target}",
        )

    def read_only(self, target: str | int, *, recursive: bool = True) -> None:
        """Make the mount at `target` (a path, or a detached mount's descriptor) read-only,
        and, `recursive`, every mount under it."""
        attr = struct.pack("QQQQ", _MOUNT_ATTR_RDONLY, 0, 0, 0)
        buf = ctypes.create_string_buffer(attr, len(attr))
        flags = _AT_RECURSIVE if recursive else 0
        if isinstance(target, int):
            at, path, flags = target, b"", flags | _AT_EMPTY_PATH
        else:
            at, path = _AT_FDCWD, os.fsencode(target)
        result = self.libc.syscall(
            ctypes.c_long(_SYS_MOUNT_SETATTR),
            ctypes.c_int(at),
            path,
            ctypes.c_uint(flags),
            buf,
            ctypes.c_size_t(len(attr)),
        )
        self.check(result, f"mount_setattr {target}")

    def clone(self, source: str) -> int:
        """A detached copy of the mount tree at `source` (`open_tree`); a descriptor to close."""
        flags = _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_RECURSIVE
        fd = self.libc.syscall(
            ctypes.c_long(_SYS_OPEN_TREE),
            ctypes.c_int(_AT_FDCWD),
            os.fsencode(source),
            ctypes.c_uint(flags),
        )
        self.check(fd, f"open_tree {source}")
        return int(fd)

    def attach(self, tree: int, target: str) -> None:
        """Attach the detached mount tree `tree` at `target` (`move_mount`)."""
        result = self.libc.syscall(
            ctypes.c_long(_SYS_MOVE_MOUNT),
            ctypes.c_int(tree),
            b"",
            ctypes.c_int(_AT_FDCWD),
            os.fsencode(target),
            ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH),
        )
        self.check(result, f"move_mount {target}")

    def setns(self, fd: int) -> None:
        """Move into the mount namespace `fd` names."""
        self.check(self.libc.setns(ctypes.c_int(fd), ctypes.c_int(CLONE_NEWNS)), "setns")

    def umount(self, target: str) -> None:
        self.check(self.libc.umount2(os.fsencode(target), _MNT_DETACH), f"umount {target}")

    def pivot_root(self, new: str, old: str) -> None:
        result = self.libc.syscall(
            ctypes.c_long(_SYS_PIVOT_ROOT), os.fsencode(new), os.fsencode(old)
        )
        self.check(result, "pivot_root")

    def drop_bounding_set(self, last: int) -> None:
        """No program this process starts gains a capability, even as root in the namespace."""
        for cap in range(last + 1):
            self.check(self.libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), "PR_CAPBSET_DROP")

    def dumpable(self, value: bool) -> None:
        """Whether processes of this user may open this one's /proc files (fd, root, mem)."""
        self.check(self.libc.prctl(_PR_SET_DUMPABLE, int(value), 0, 0, 0), "PR_SET_DUMPABLE")

    def fork_own_pids(self) -> int:
        """`os.fork()` whose child is the first process (pid 1) of a PID namespace of its own.

        `unshare(CLONE_NEWPID)` works once per process, so a zygote that forks many calls
        clones each child into its namespace instead, with the interpreter's own fork
        bookkeeping around it (what `os.fork` does); the zygote is single-threaded.
        """
        self.api.PyOS_BeforeFork()
        pid = self.libc.syscall(
            ctypes.c_long(_SYS_CLONE),
            ctypes.c_ulong(CLONE_NEWPID | signal.SIGCHLD),
            None,
            None,
            None,
            None,
        )
        if pid == 0:
            self.api.PyOS_AfterFork_Child()
            return 0
        self.api.PyOS_AfterFork_Parent()
        self.check(pid, "clone")
        return int(pid)

    def die_with_parent(self) -> None:
        """This process is killed when its parent dies (`PR_SET_PDEATHSIG`)."""
        self.check(self.libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "PDEATHSIG")

    def drop_capabilities(self) -> None:
        """Clear this process's effective, permitted and inheritable capabilities."""
        header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        data = bytes(24)  # two empty {effective, permitted, inheritable} sets
        self.check(self.libc.capset(header, data), "capset")


_lib: _Lib | None = None


def _c() -> _Lib:
    global _lib
    if _lib is None:
        _lib = _Lib()
    return _lib


def enter(view: dict[str, object]) -> Views:
    """Move this process into namespaces of its own and build the static view; what its calls
    need of it (see `Views`).

    `view` is `{"net": "own" | "host", "read": [...], "write": [...]}`: the paths every call
    reads or writes (paths that do not exist are left out). Raises OSError (its text one
    line) when the kernel refuses; the process is then unusable for tools.
    """
    c = _c()
    uid, gid = os.getuid(), os.getgid()
    tops = _host_tops()
    planned = _plan(view)
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last_cap = int(f.read())
    c.unshare(CLONE_NEWUSER | CLONE_NEWNS | (CLONE_NEWNET if view.get("net") == "own" else 0))
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    if view.get("net") == "own":
        _loopback_up()
    entries = _static_root(tops, planned)
    c.drop_bounding_set(last_cap)
    # Through /proc/PID/root, a process of aat's user could otherwise reach the host's tree
    # this one keeps at HOST; a call's child is made dumpable again once it has left it.
    c.dumpable(False)
    return entries, _tools_namespace()


def _static_root(tops: list[tuple[str, str | None]], planned: list[tuple[str, str]]) -> list[Entry]:
    """Make a fresh tmpfs this mount namespace's root, the host's tree moving to `HOST`, with
    the host's top-level names and the `planned` binds in it; its entries."""
    c = _c()
    c.mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    c.mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, _TMPFS)
    os.mkdir("/tmp" + HOST)
    c.pivot_root("/tmp", "/tmp" + HOST)
    os.chdir("/")
    for name, link in tops:
        if link is None:
            os.mkdir("/" + name, 0o755)
        else:
            os.symlink(link, "/" + name)
    entries: list[Entry] = [("link", path, target) for path, target in _DEV_LINKS.items()]
    for path, mode in planned:
        _bind(path, mode)
        entries.append(("bind", path, mode))
    for path, target in _DEV_LINKS.items():
        os.symlink(target, path)
    c.read_only("/", recursive=False)  # the view's own folders; binds keep their mode
    return entries


def _tools_namespace() -> int:
    """A mount namespace like this one without the host's tree; a descriptor of it (kept open
    for good, inherited by every call's child, which closes it)."""
    c = _c()
    ours = os.open(HOST + "/proc/self/ns/mnt", os.O_RDONLY)
    try:
        c.unshare(CLONE_NEWNS)
        tools = os.open(HOST + "/proc/self/ns/mnt", os.O_RDONLY)
        c.umount(HOST)
        c.setns(ours)
    finally:
        os.close(ours)
    return tools


def narrow(
    views: Views, read: list[str], write: list[str], bounds: dict[str, object] | None = None
) -> None:
    """In a call's child: a copy of the tools' mount namespace with the call's own paths in
    it, bounded by `bounds`, and no privilege left.

    `read` and `write` are the call's resolved paths (those already in the static view are
    skipped, as are those that do not exist). `bounds` is `{"processes": N, "scratch": PATH,
    "scratch_mb": M}` (see `bound`). Raises OSError when the kernel refuses.
    """
    c = _c()
    static, tools = views
    tops, links, trees = _clone_own(static, read, write)
    c.setns(tools)
    os.close(tools)
    c.unshare(CLONE_NEWNS)
    for top in tops:
        c.mount("tmpfs", top, "tmpfs", _MS_NOSUID | _MS_NODEV, _TMPFS)
    for path, target in links:
        _parents(path)
        os.symlink(target, path)
    for path, is_dir, tree in sorted(trees, key=lambda t: _depth(t[0])):
        _mountpoint(path, is_dir)
        c.attach(tree, path)
        os.close(tree)
    for top in tops:  # as read-only as the static view's own folders
        c.read_only(top, recursive=False)
    if bounds is not None:
        bound(bounds)
    c.drop_capabilities()
    c.dumpable(True)


def fork_own_pids() -> int:
    """`os.fork()`, the child being pid 1 of a PID namespace of its own (see `_Lib`) that
    ends when this process does (its channel would otherwise outlive it); raises OSError
    when the kernel refuses."""
    pid = _c().fork_own_pids()
    if pid == 0:
        with contextlib.suppress(OSError):  # (never refused: its own process, a known signal)
            _c().die_with_parent()
    return pid


def bound(bounds: dict[str, object]) -> None:
    """In a call's child, in its own mount namespace and still privileged there: its scratch
    folder a tmpfs of `scratch_mb`; and, when it is pid 1 of a PID namespace of its own, a
    fresh `/proc` that shows only that namespace's processes, which may number at most
    `processes` and one more (the one more is how the child sees the limit was hit)."""
    c = _c()
    scratch, size = bounds.get("scratch"), bounds.get("scratch_mb")
    if isinstance(scratch, str) and isinstance(size, int):
        inodes = max(4096, size * 256)
        options = f"mode=0700,size={size}m,nr_inodes={inodes}"
        c.mount("tmpfs", scratch, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
    if os.getpid() != 1:
        return
    c.mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    processes = bounds.get("processes")
    if isinstance(processes, int):
        _pid_cap(processes)


def _pid_cap(processes: int) -> None:
    """Let this PID namespace hand out pids 300 to 300 + `processes` only (Linux 6.14+, where
    pid_max is the namespace's own); elsewhere the child's count alone holds the limit."""
    try:
        _write("/proc/sys/kernel/pid_max", str(_RESERVED_PIDS + processes + 1))
    except OSError:
        return
    _write("/proc/sys/kernel/ns_last_pid", str(_RESERVED_PIDS))


Tree = tuple[str, bool, int]  # (view path, a folder?, a detached mount tree's descriptor)


def _clone_own(
    static: list[Entry], read: list[str], write: list[str]
) -> tuple[list[str], list[tuple[str, str]], list[Tree]]:
    """In the zygote's namespace (which has `HOST`): the call's own paths as detached mount
    trees, the host top-level folders to cover with a fresh tmpfs for it, and the static links
    and trees to put back under those."""
    c = _c()
    covered = {path: mode for kind, path, mode in static if kind == "bind"}
    own: dict[str, str] = {}
    for path, mode in [(p, WRITE) for p in write] + [(p, READ) for p in read]:
        if path.startswith(("/proc/", "/dev/")) or path in own or _within(path, mode, covered):
            continue
        if os.path.lexists(HOST + path):
            own[path] = mode
    tops: list[str] = []
    links: list[tuple[str, str]] = []
    trees: list[Tree] = []
    for path in sorted(own, key=_depth):
        top = "/" + path.split("/")[1]
        if not os.path.lexists(path) and top not in tops:
            if not os.path.isdir(top) or os.path.islink(top):
                raise OSError(0, f"{top} is not in the tools' view; restart aat to pick it up")
            tops.append(top)
            for kind, spath, how in static:
                if spath.startswith(top + "/"):
                    if kind == "link":
                        links.append((spath, how))
                    else:  # a copy of the static view's own mount keeps its mode
                        trees.append((spath, os.path.isdir(spath), c.clone(spath)))
        tree = c.clone(HOST + path)
        trees.append((path, os.path.isdir(HOST + path), tree))
        if own[path] != WRITE:
            c.read_only(tree)
    return tops, links, trees


def _mountpoint(path: str, is_dir: bool) -> None:
    if os.path.lexists(path):
        return
    _parents(path)
    if is_dir:
        os.mkdir(path, 0o755)
    else:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))


def _bind(path: str, mode: str) -> None:
    """Bind the host's `path` at `path` in this view (read-only unless `mode` is WRITE)."""
    source = HOST + path
    if not os.path.lexists(path):
        _parents(path)
        if os.path.isdir(source):
            os.mkdir(path, 0o755)
        else:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
    _c().mount(source, path, None, _MS_BIND | _MS_REC)
    if mode != WRITE:
        _c().read_only(path)


def _parents(path: str) -> None:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)


def _within(path: str, mode: str, covered: dict[str, str]) -> bool:
    """Whether `path` is in the static view already, with at least `mode`."""
    probe = path
    while True:
        have = covered.get(probe)
        if have is not None:
            return have == WRITE or mode == READ
        if probe == "/":
            return False
        probe = os.path.dirname(probe)


def _depth(path: str) -> tuple[int, str]:
    return (path.count("/"), path)


def _plan(view: dict[str, object]) -> list[tuple[str, str]]:
    """The static binds, resolved on the host before anything moves: (path, mode), parents
    first, none inside another of the same or a stronger mode."""
    found: dict[str, str] = {}
    for mode in (WRITE, READ):
        for raw in view.get(mode) or ():  # type: ignore[attr-defined]
            path = "/proc" if str(raw).startswith("/proc/") else _in_view(str(raw))
            if path is not None and path not in found and os.path.lexists(path):
                found[path] = mode
    planned: list[tuple[str, str]] = []
    covered: dict[str, str] = {}
    for path in sorted(found, key=_depth):
        if not _within(path, found[path], covered):
            planned.append((path, found[path]))
            covered[path] = found[path]
    return planned


def _in_view(path: str) -> str | None:
    """Where `path` lands in the view: the host's own spelling, with a top-level symlink
    (`/lib64` -> `usr/lib64`) taken as the view takes it; deeper symlinks are bound through
    (`/etc/resolv.conf` is bound from wherever it points)."""
    if not path.startswith("/") or path == "/":
        return None
    parts = path.split("/")
    top = "/" + parts[1]
    if os.path.islink(top):
        target = os.path.normpath(os.path.join("/", os.readlink(top)))
        return os.path.normpath("/".join([target, *parts[2:]]))
    return os.path.normpath(path)


def _host_tops() -> list[tuple[str, str | None]]:
    """The host's top-level names: folders (None) and symlinks (their text)."""
    found: list[tuple[str, str | None]] = []
    for entry in os.scandir("/"):
        if "/" + entry.name == HOST:
            continue
        if entry.is_symlink():
            found.append((entry.name, os.readlink(entry.path)))
        elif entry.is_dir(follow_symlinks=False):
            found.append((entry.name, None))
    return found


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def probe() -> str | None:
    """None when this process could enter the namespaces tools run in; else why not.

    Changes this process for good: only for a throwaway process (`python namespaces.py`).
    """
    if _SYS_PIVOT_ROOT < 0:
        return f"namespaces are not supported here ({platform.machine()})"
    try:
        here = os.path.dirname(os.path.realpath(__file__))
        views = enter({"net": "own", "read": ["/usr", "/proc/self"], "write": []})
        pid = fork_own_pids()
        if pid == 0:
            try:
                narrow(views, [here], [], {})  # with its own /proc, as pid 1 of its own
            except OSError:
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            return "a call's own mount and PID namespaces could not be made"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


if __name__ == "__main__":
    problem = probe()
    with contextlib.suppress(OSError):
        sys.stdout.write(json.dumps({"problem": problem}))
    sys.exit(0 if problem is None else 1)
