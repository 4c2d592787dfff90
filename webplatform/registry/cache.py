"""Parsed manifests kept on disk, so a cold start does not parse unchanged YAML again.

One file per registry (its roots named in the file name's hash) under the cache folder,
written atomically with mode 0600. An entry is reused only when the manifest's size,
modification time and content hash all still match, and its entrypoint's size and
modification time too. A file that is unreadable, corrupt, from another format version, not
owned by this user, or not signed with this AAT_HOME's key is ignored and rebuilt.

The file is JSON (`codec.py`), never a pickle: every new aat process reads it, so a file
that could run code when read would make whoever can write it aat. And it carries an
HMAC-SHA256 made with a key kept beside the cache folder in AAT_HOME (`registry-cache.key`,
0600), which no tool may read (SPEC §19): a forged entry (an irreversible action cached as
read-only) is as useless as a forged file.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webplatform import keyfiles
from webplatform.registry import codec
from webplatform.registry.model import ManifestError, SkillSpec, ToolSpec

log = logging.getLogger(__name__)

FORMAT = 4  # 3: JSON with an HMAC, instead of a pickle; 4: ToolSpec gained `network`
MAGIC = b"aat-registry-cache"
KEY_FILE = "registry-cache.key"
# (size, mtime_ns) of a file; None when it is missing.
FileKey = tuple[int, int] | None


def stat_or_none(path: str | Path | None) -> os.stat_result | None:
    """A file's `os.stat`, or None when there is no path or no such file."""
    if path is None:
        return None
    try:
        return os.stat(path)
    except OSError:
        return None


def file_key(path: Path | None) -> FileKey:
    """A file's (size, mtime_ns), or None if there is no such file."""
    st = stat_or_none(path)
    return None if st is None else (st.st_size, st.st_mtime_ns)


def content_hash(path: Path) -> str | None:
    """The SHA-256 of the file's bytes, or None if it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


@dataclass(frozen=True)
class Entry:
    """One manifest as it was parsed: the keys it was parsed from and the loader's result
    (its entrypoint, the tool/agent or skill it defines, its errors)."""

    manifest: FileKey
    digest: str
    entrypoint: FileKey
    entrypoint_path: Path | None
    tool: ToolSpec | None
    skill: SkillSpec | None
    errors: tuple[ManifestError, ...]


class ManifestCache:
    """Reads and writes the cache file for one set of registry roots."""

    def __init__(self, folder: Path, roots: Sequence[Path]) -> None:
        tag = hashlib.sha256("\0".join(str(r) for r in roots).encode()).hexdigest()[:16]
        self.path = folder / f"registry-{tag}.json"
        # Beside the cache folder, not in it: whoever could replace the file could not also
        # replace the key it is checked with.
        self.key_path = folder.parent / KEY_FILE

    def read(self) -> dict[Path, Entry]:
        """The stored entries; empty when the file is absent, foreign, forged or unreadable."""
        try:
            with open(self.path, "rb") as fh:
                if os.fstat(fh.fileno()).st_uid != os.getuid():
                    return {}
                raw = fh.read()
            key = keyfiles.read_private(self.key_path)
        except FileNotFoundError:
            return {}
        except (OSError, keyfiles.KeyFileError) as exc:
            log.info("ignoring the registry cache %s (%s); rebuilding it", self.path, exc)
            return {}
        body = _verified(raw, key)
        if body is None:
            log.warning("ignoring the registry cache %s: not signed by aat; rebuilt", self.path)
            return {}
        try:
            return _decode(body)
        except Exception as exc:  # authentic but from another shape of the classes
            log.info("ignoring the registry cache %s (%s); rebuilding it", self.path, exc)
            return {}

    def write(self, entries: dict[Path, Entry]) -> None:
        """Replace the file atomically; a failure is logged and otherwise ignored."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            body = _encode(entries)
            mac = hmac.new(self._key(), body, hashlib.sha256).hexdigest().encode()
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".registry-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(MAGIC + b" " + mac + b"\n" + body)
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except (OSError, keyfiles.KeyFileError) as exc:
            log.info("cannot write the registry cache %s (%s)", self.path, exc)
            return
        # The pickle an older aat kept here is read by nothing now; leave no trap behind.
        with contextlib.suppress(OSError):
            self.path.with_suffix(".pickle").unlink(missing_ok=True)

    def _key(self) -> bytes:
        """This AAT_HOME's cache key, made on first use (by whichever process is first)."""
        if not self.key_path.exists():
            keyfiles.write(self.key_path, secrets.token_bytes(32), mode=0o600, replace=False)
        return keyfiles.read_private(self.key_path)


def _verified(raw: bytes, key: bytes) -> bytes | None:
    """The body of a cache file whose HMAC matches `key`, or None."""
    head, _, body = raw.partition(b"\n")
    magic, _, mac = head.partition(b" ")
    if magic != MAGIC or len(key) < 32:
        return None
    expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    return body if hmac.compare_digest(mac, expected) else None


def _schema() -> str:
    return f"{FORMAT}:{codec.schema(Entry)}"


def _encode(entries: dict[Path, Entry]) -> bytes:
    encoded: dict[str, Any] = {}
    for path, entry in entries.items():
        try:
            encoded[str(path)] = codec.encode(entry)
        except codec.Unencodable as exc:  # parsed again next time, like a new manifest
            log.debug("not caching %s: %s", path, exc)
    document = {"schema": _schema(), "entries": encoded}
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def _decode(body: bytes) -> dict[Path, Entry]:
    # Some 100,000 objects and no cycle among them: the collector's passes while they are
    # made would cost more than making them.
    collecting = gc.isenabled()
    gc.disable()
    try:
        document = json.loads(body)
        if document.get("schema") != _schema():
            return {}
        return {Path(p): codec.decode(Entry, data) for p, data in document["entries"].items()}
    finally:
        if collecting:
            gc.enable()
