"""Paths a manifest declares (`reads:`, `writes:`): how they expand, and what they may not name.

`$AAT_HOME` (or `${AAT_HOME}`) and a leading `~` are expanded; nothing else is, so a manifest
means the same on every machine that has the same AAT_HOME. aat's own state (AAT_HOME and its
database), the registry folders and aat's installation are never a tool's to write.

Inside AAT_HOME a tool may name only the folders kept for tools' data (`DATA_FOLDERS`): the
rest of AAT_HOME is aat's own (its database, keys, the registry cache every new aat process
loads, the relay socket and its secret), and a tool that could read or write it could act
as aat (SPEC §19).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

# The folder that holds the `webplatform` package: site-packages for an installed wheel (so
# its `.pth` files are covered), the checkout for an editable install.
INSTALLATION = Path(__file__).resolve().parents[2]

_HOME_VAR = re.compile(r"\$\{AAT_HOME\}|\$AAT_HOME(?![A-Za-z0-9_])")
_OTHER_VAR = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
# What a manifest may name inside AAT_HOME: the example outbox, and one folder per tool under
# `data/` (never `data/` itself, which holds every tool's).
OUTBOX = "outbox"
DATA = "data"
DATA_FOLDERS = f"$AAT_HOME/{OUTBOX} or $AAT_HOME/{DATA}/<tool>"


def expand(raw: str, *, home: Path) -> Path:
    """`raw` with `$AAT_HOME` and `~` expanded; ValueError (one line) for anything unusable."""
    text = _HOME_VAR.sub(lambda _m: str(home), raw)
    other = _OTHER_VAR.search(text)
    if other:
        raise ValueError(
            f"'{raw}' uses {other.group(0)}; only $AAT_HOME and ~ are expanded, "
            "write the rest of the path out"
        )
    path = Path(text).expanduser()
    if not path.is_absolute():
        raise ValueError(f"'{raw}' is not an absolute path; start it with /, ~ or $AAT_HOME")
    return Path(os.path.normpath(path))


def overlaps(a: Path, b: Path) -> bool:
    """True when one path is the other or lies inside it."""
    if not (a.is_absolute() and b.is_absolute()):
        return a == b or a.is_relative_to(b) or b.is_relative_to(a)
    x, y = str(a), str(b)
    return within(x, y) or within(y, x)


def within(path: str, folder: str) -> bool:
    """Whether the absolute `path` is `folder` or lies inside it, compared as text (both as
    `str(Path)` writes them): the test `Path.is_relative_to` makes part by part, at a small
    part of its cost (a call's workspace checks make dozens)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def interpreter_prefixes() -> list[Path]:
    """Where the running Python and its libraries live (read by tools, written by none)."""
    return list(_interpreter_prefixes())


@functools.cache
def _interpreter_prefixes() -> tuple[Path, ...]:
    # The running interpreter's: resolved once per process.
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return tuple(sorted({Path(p).resolve() for p in found}))


def home_problem(path: Path, *, home: Path, what: str) -> str | None:
    """Why `path` (absolute, normalised) is aat's own and no tool's to read or write, or None.

    Outside AAT_HOME: None. Inside it, only a data folder of tools (or a path in one) is
    allowed; AAT_HOME itself and a folder that contains it never are.
    """
    if home.is_relative_to(path):
        return (
            f"{what} is or contains AAT_HOME, where aat keeps its database and keys; "
            f"name a folder of its own inside it ({DATA_FOLDERS})"
        )
    if not path.is_relative_to(home):
        return None
    parts = path.relative_to(home).parts
    if parts[0] == OUTBOX or (parts[0] == DATA and len(parts) >= 2):
        return None
    return (
        f"{what} is in AAT_HOME but in no data folder of tools (AAT_HOME holds aat's cache, "
        f"keys, database and sockets); name {DATA_FOLDERS} instead"
    )


def write_problem(
    path: Path, *, home: Path, registry_roots: Iterable[Path], what: str
) -> str | None:
    """Why `path` may not be written by a tool, or None; `what` names it in the message.

    `path` is absolute and normalised.
    A data folder of tools inside AAT_HOME (`home_problem`) is allowed; the rest of AAT_HOME,
    a folder that contains it, a registry folder or aat's or Python's installation is not.
    """
    problem = home_problem(path, home=home, what=what)
    if problem:
        return problem
    for root in registry_roots:
        if overlaps(path, root):
            return (
                f"{what} overlaps the registry folder {root}; tools may never "
                "change the registry, name a folder outside it"
            )
    for installed, label in [(INSTALLATION, "aat's installation")] + [
        (p, "the Python installation") for p in interpreter_prefixes()
    ]:
        if overlaps(path, installed):
            return f"{what} overlaps {label} ({installed}); name a folder outside it"
    return None
