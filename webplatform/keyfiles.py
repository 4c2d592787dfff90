"""Key files in AAT_HOME: written whole, in one step, with their mode; a private one is read
only while no other user can read or change it (as OpenSSH treats a private key)."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


class KeyFileError(ValueError):
    """A key file aat will not use, and what to do about it (one line)."""


def read_private(path: Path) -> bytes:
    """The bytes of a private key file; KeyFileError when its mode lets another user read or
    change it."""
    with open(path, "rb") as handle:
        mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
        if mode & 0o077:
            raise KeyFileError(
                f"{path} can be read or changed by other users (mode {mode:04o}); "
                f"run `chmod 600 {path}` and start again"
            )
        return handle.read()


def write(path: Path, data: bytes, *, mode: int, replace: bool = True) -> None:
    """Write `data` to a temporary file with `mode`, then put it at `path` in one step.

    `replace=False` keeps an existing file (another process made it first).
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
