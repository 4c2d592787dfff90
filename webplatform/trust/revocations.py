"""Revoked signed rows, remembered outside the database: `AAT_HOME/revoked-rows`.

A signature says a row was made by aat, not that it is still current. So whenever aat
revokes, removes or replaces a signed row (an agent token revoked or given a new token, a
passkey or an operator removed, a password changed, a rule revoked), it first appends the
sha256 of the row's signed content to this file; a row whose content is listed counts as
absent (`webplatform.store.seals.row_holds`). Someone who can write the database but not
`AAT_HOME` can then no longer put back an earlier signed row they copied.

The file is owner-only and only ever appended to, one fingerprint a line, each append
`fsync`'d before the database change it precedes. Readers re-read it when its size or
modification time changed. Each host has its own (as the decision ledger); on PostgreSQL
`revocation_chain` adds the database's hash chain, which every host reads.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

REVOKED_FILE = "revoked-rows"
_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW


class RevocationFile:
    """The fingerprints of revoked rows in one `AAT_HOME` (see the module)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._fingerprints: frozenset[str] = frozenset()

    def __contains__(self, fingerprint: object) -> bool:
        """True when a row with this content was revoked (on this host)."""
        return fingerprint in self._current()

    def add(self, fingerprint: str) -> None:
        """Append `fingerprint`, durably, before the caller changes the database."""
        fd = os.open(self.path, _OPEN_FLAGS, 0o600)
        try:
            os.write(fd, (fingerprint + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        with self._lock:
            self._fingerprints = self._fingerprints | {fingerprint}

    def _current(self) -> frozenset[str]:
        """The listed fingerprints, read again when the file changed since the last read."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return self._fingerprints
        seen = (stat.st_size, stat.st_mtime_ns)
        with self._lock:
            if seen != self._seen:
                text = self.path.read_text(encoding="ascii", errors="replace")
                self._fingerprints = frozenset(line for line in text.split() if line)
                self._seen = seen
            return self._fingerprints


def revocations_for(home: Path) -> RevocationFile:
    """The revocation list of `home`."""
    return RevocationFile(home / REVOKED_FILE)
