"""Landlock through its three system calls: a ruleset built by aat, enforced in the tool's child.

This file imports only the standard library: the warm interpreter (`zygote.py`) loads it as a
sibling script, without aat.

A plain run builds the ruleset in aat's process (`ruleset(read, write)`: every rule's file is
opened and added there, so a refusal is an ordinary error before anything is started) and the
forked child, between fork and exec, only calls `confiner(fd)`: `PR_SET_NO_NEW_PRIVS` and
`landlock_restrict_self`, two system calls through function pointers resolved beforehand (no
import, no dlopen, no lock in the child). Read rules allow execute, reading files and listing
folders; write rules add create, change and remove. TCP rules (ABI 4) allow connecting to, and
listening on, the ports a manifest's `network:` lists and no other (SPEC §17). Scopes (ABI 6)
keep signals and abstract Unix sockets within the tool's own processes. Landlock domains are
inherited and can never be lifted, so nothing the tool starts escapes them.

A child that cannot be confined exits 126 with one line on stderr instead of running the tool
unconfined.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
import sys
from collections.abc import Callable, Sequence

# Same numbers on x86_64 and aarch64 (the generic syscall table).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38
EXIT_NOT_CONFINED = 126

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
# TCP (ABI 4): bind(2) to, and connect(2) to, a port.
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
NET_ABI = 4
# Scopes (ABI 6): no signals to, and no abstract unix sockets of, processes outside the domain.
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
# Device nodes are never created: MAKE_CHAR and MAKE_BLOCK are handled and never granted.
WRITE = (
    READ
    | WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE
    | IOCTL_DEV
)
# The only rights Landlock accepts on a rule for a single file rather than a folder.
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _NetPortAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 where Landlock is missing or switched off."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _libc().syscall(
        ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1)
    )
    return max(int(version), 0)


def _handled(abi: int) -> int:
    """Every filesystem right this ABI knows, so nothing is left unrestricted by omission."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


Net = dict[str, list[int]]


def restrict(read: list[str], write: list[str], net: Net | None = None) -> int:
    """Confine this process (and all it will exec) to `read` and `write`; returns the ABI.

    Paths that do not exist are skipped (a rule needs an open file). `net` as for `ruleset`.
    Raises OSError when the kernel refuses; the caller must then not run the tool.
    """
    fd = ruleset(read, write, here=True, net=net)
    try:
        libc = _libc()
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(
            libc.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), fd, ctypes.c_uint32(0)),
            "landlock_restrict_self",
        )
    finally:
        os.close(fd)
    return abi_version()


def ruleset(
    read: list[str], write: list[str], *, here: bool = False, net: Net | None = None
) -> int:
    """A Landlock ruleset allowing `read` and `write` (a close-on-exec descriptor to close).

    Paths that do not exist are skipped (a rule needs an open file). A path that means a
    different file in each process (`/proc/self`) is left to the process that enforces the
    ruleset (`confiner`), unless that is this one (`here`). `net` (`{"connect": [443],
    "bind": []}`) allows TCP connections to and listening on those ports only (ABI 4); None
    leaves TCP alone. Raises OSError when Landlock is missing, too old for `net`, or the
    kernel refuses a rule.
    """
    abi = abi_version()
    if abi < 1:
        raise OSError(0, "Landlock is not available in this kernel")
    if net is not None and abi < NET_ABI:
        raise OSError(0, f"Landlock ABI {abi} has no TCP rules (ABI {NET_ABI}, Linux 6.7)")
    handled = _handled(abi)
    libc = _libc()
    fd = _create(libc, abi, handled, net is not None)
    try:
        for paths, rights in ((read, READ), (write, WRITE)):
            for path in paths:
                if here or not _per_process(path):
                    _add_rule(libc, fd, path, rights & handled)
        for key, right in (("connect", CONNECT_TCP), ("bind", BIND_TCP)):
            for port in (net or {}).get(key, ()):
                _add_port(libc, fd, int(port), right)
    except BaseException:
        os.close(fd)
        raise
    return fd


def confiner(fd: int, read: Sequence[str] = (), write: Sequence[str] = ()) -> Callable[[], None]:
    """What a forked child runs before exec: confine it by ruleset `fd`, or exit 126.

    `read` and `write` are the rules given to `ruleset`: those it left to the child
    (`/proc/self`) are added there. Everything else is resolved here, in the parent; the child
    makes a few system calls and, only when the kernel refuses, writes one line to its stderr
    and exits without running the tool.
    """
    libc = _libc()
    syscall, prctl, get_errno = libc.syscall, libc.prctl, ctypes.get_errno
    handled = _handled(abi_version())
    late = [
        (os.fsencode(path), rights & handled, _PathBeneathAttr(rights & handled, -1))
        for paths, rights in ((read, READ), (write, WRITE))
        for path in paths
        if _per_process(path)
    ]
    add_rule = (ctypes.c_long(_SYS_ADD_RULE), fd, ctypes.c_int(_RULE_PATH_BENEATH))
    no_new_privs = (_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    restrict_self = (ctypes.c_long(_SYS_RESTRICT_SELF), fd, ctypes.c_uint32(0))
    flag, no_flags = os.O_PATH | os.O_CLOEXEC, ctypes.c_uint32(0)

    def refuse() -> None:
        why = os.strerror(get_errno())
        os.write(2, f"aat: the tool was not run: confinement failed ({why})\n".encode())
        os._exit(EXIT_NOT_CONFINED)

    def confine() -> None:
        for path, rights, attr in late:
            try:
                opened = os.open(path, flag)
            except OSError:
                continue
            if not stat.S_ISDIR(os.fstat(opened).st_mode):
                attr.allowed_access = rights & _FILE_RIGHTS
            attr.parent_fd = opened
            failed = syscall(*add_rule, ctypes.byref(attr), no_flags) < 0
            os.close(opened)
            if failed:
                refuse()
        if prctl(*no_new_privs) < 0 or syscall(*restrict_self) < 0:
            refuse()

    return confine


def _per_process(path: str) -> bool:
    return path == "/proc/self" or path.startswith(("/proc/self/", "/proc/thread-self"))


def _create(libc: ctypes.CDLL, abi: int, handled: int, tcp: bool) -> int:
    """An empty ruleset handling `handled` file rights (and TCP, when `tcp`), with scopes."""
    attr = _RulesetAttr(
        handled,
        BIND_TCP | CONNECT_TCP if tcp else 0,
        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL,
    )
    # Older kernels reject fields they lack: ABI 4 added the network field, ABI 6 the scopes.
    size = ctypes.sizeof(attr) if abi >= 6 else 16 if abi >= NET_ABI else 8
    return _check(
        libc.syscall(
            ctypes.c_long(_SYS_CREATE_RULESET),
            ctypes.byref(attr),
            ctypes.c_size_t(size),
            ctypes.c_uint32(0),
        ),
        "landlock_create_ruleset",
    )


def _add_port(libc: ctypes.CDLL, ruleset: int, port: int, right: int) -> None:
    attr = _NetPortAttr(right, port)
    _check(
        libc.syscall(
            ctypes.c_long(_SYS_ADD_RULE),
            ruleset,
            ctypes.c_int(_RULE_NET_PORT),
            ctypes.byref(attr),
            ctypes.c_uint32(0),
        ),
        f"landlock_add_rule(port {port})",
    )


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        attr = _PathBeneathAttr(rights, fd)
        _check(
            libc.syscall(
                ctypes.c_long(_SYS_ADD_RULE),
                ruleset,
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.byref(attr),
                ctypes.c_uint32(0),
            ),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(fd)
