"""Landlock through its three system calls, and the launcher that confines a tool, then execs it.

This file imports only the standard library: it also runs as a script, with `python -I -S`
(no site-packages, no environment), in the fresh child process between the runner's spawn and
the tool's own code:

    python -I -S landlock.py RULES_JSON -- ARGV...

RULES_JSON is `{"read": [...], "write": [...]}`. The launcher sets `PR_SET_NO_NEW_PRIVS`,
restricts itself to those paths (read: execute, read files, list folders; write: all of that
plus create, change and remove) and `execvp`s ARGV with the same environment, working
directory and process group, so the tool runs exactly as before, only confined. Landlock
domains are inherited and can never be lifted, so nothing the tool starts escapes them.

A child without Landlock could not honour the rules: the launcher then exits 126 with one
line on stderr instead of running the tool unconfined.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import sys

# Same numbers on x86_64 and aarch64 (the generic syscall table).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
EXIT_NOT_CONFINED = 126

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
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


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 where Landlock is missing or switched off."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(
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


def restrict(read: list[str], write: list[str]) -> int:
    """Confine this process (and all it will exec) to `read` and `write`; returns the ABI.

    Paths that do not exist are skipped (a rule needs an open file). Raises OSError when the
    kernel refuses; the caller must then not run the tool.
    """
    abi = abi_version()
    if abi < 1:
        raise OSError(0, "Landlock is not available in this kernel")
    handled = _handled(abi)
    attr = _RulesetAttr(handled, 0, _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL)
    size = ctypes.sizeof(attr) if abi >= 6 else 8  # older kernels reject fields they lack
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    ruleset = _check(
        libc.syscall(
            ctypes.c_long(_SYS_CREATE_RULESET),
            ctypes.byref(attr),
            ctypes.c_size_t(size),
            ctypes.c_uint32(0),
        ),
        "landlock_create_ruleset",
    )
    try:
        for paths, rights in ((read, READ), (write, WRITE)):
            for path in paths:
                _add_rule(libc, ruleset, path, rights & handled)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(
            libc.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ruleset, ctypes.c_uint32(0)),
            "landlock_restrict_self",
        )
    finally:
        os.close(ruleset)
    return abi


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


def main(argv: list[str]) -> None:
    """`landlock.py RULES_JSON -- ARGV...`: confine, then become ARGV (never returns)."""
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: landlock.py RULES_JSON -- ARGV...\n")
        sys.exit(EXIT_NOT_CONFINED)
    rules = json.loads(argv[1])
    try:
        restrict(list(rules["read"]), list(rules["write"]))
    except OSError as exc:
        sys.stderr.write(f"aat: the tool was not run: confinement failed ({exc.strerror})\n")
        sys.exit(EXIT_NOT_CONFINED)
    command = argv[3:]
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"aat: could not start {command[0]}: {exc.strerror}\n")
        sys.exit(EXIT_NOT_CONFINED)


if __name__ == "__main__":
    main(sys.argv)
