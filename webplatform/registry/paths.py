"""Paths a manifest declares (`reads:`, `writes:`): how they expand, and what they may not name.

`$AAT_HOME` (or `${AAT_HOME}`) and a leading `~` are expanded; nothing else is, so a manifest
means the same on every machine that has the same AAT_HOME. aat's own state (AAT_HOME and its
database), the registry folders and aat's installation are never a tool's to write.
"""

from __future__ import annotations

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
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def interpreter_prefixes() -> list[Path]:
    """Where the running Python and its libraries live (read by tools, written by none)."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted({Path(p).resolve() for p in found})


def write_problem(
    path: Path, *, home: Path, registry_roots: Iterable[Path], what: str
) -> str | None:
    """Why `path` may not be written by a tool, or None; `what` names it in the message.

    `path` is absolute and normalised.
    A folder strictly inside AAT_HOME (the example outbox) is allowed; AAT_HOME itself, a
    folder that contains it, a registry folder or aat's or Python's installation is not.
    """
    if path == home or home.is_relative_to(path):
        return (
            f"{what} is or contains AAT_HOME, where aat keeps its database and keys; "
            "name a folder of its own inside it (e.g. $AAT_HOME/outbox)"
        )
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
