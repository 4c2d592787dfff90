"""Parsed manifests kept on disk, so a cold start does not parse unchanged YAML again.

One file per registry (its roots named in the file name's hash) under the cache folder,
written atomically with mode 0600. An entry is reused only when the manifest's size,
modification time and content hash all still match, and its entrypoint's size and
modification time too. A file that is unreadable, corrupt, from another format version, or
not owned by this user is ignored and rebuilt.

The file is a pickle of the loader's own frozen dataclasses: it lives in the user's own
AAT_HOME next to the database and signing key, and is trusted exactly as much as they are.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FORMAT = 3  # 2: ToolSpec gained `warm`; 3: `network`
# (size, mtime_ns) of a file; None when it is missing.
FileKey = tuple[int, int] | None


def file_key(path: Path | None) -> FileKey:
    """A file's (size, mtime_ns), or None if there is no such file."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def content_hash(path: Path) -> str | None:
    """The SHA-256 of the file's bytes, or None if it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


@dataclass(frozen=True)
class Entry:
    """One manifest as it was parsed: its keys and the loader's result (opaque here)."""

    manifest: FileKey
    digest: str
    entrypoint: FileKey
    value: Any


class ManifestCache:
    """Reads and writes the cache file for one set of registry roots."""

    def __init__(self, folder: Path, roots: Sequence[Path]) -> None:
        tag = hashlib.sha256("\0".join(str(r) for r in roots).encode()).hexdigest()[:16]
        self.path = folder / f"registry-{tag}.pickle"

    def read(self) -> dict[Path, Entry]:
        """The stored entries; empty when the file is absent, foreign or unreadable."""
        try:
            with open(self.path, "rb") as fh:
                if os.fstat(fh.fileno()).st_uid != os.getuid():
                    return {}
                stored = pickle.load(fh)
        except FileNotFoundError:
            return {}
        except Exception as exc:  # corrupt, truncated, from another version of the classes
            log.info("ignoring the registry cache %s (%s); rebuilding it", self.path, exc)
            return {}
        if not isinstance(stored, dict) or stored.get("format") != FORMAT:
            return {}
        entries = stored.get("entries")
        return entries if isinstance(entries, dict) else {}

    def write(self, entries: dict[Path, Entry]) -> None:
        """Replace the file atomically; a failure is logged and otherwise ignored."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".registry-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    pickle.dump({"format": FORMAT, "entries": entries}, fh, protocol=5)
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            log.info("cannot write the registry cache %s (%s)", self.path, exc)
