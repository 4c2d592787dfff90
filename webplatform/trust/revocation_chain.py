"""Revocations every host sees (SPEC §24): the host's own file and the database's hash chain.

On one PostgreSQL database shared by several hosts, a row revoked, removed or replaced on one
host must count as absent on every host, and a database writer must not be able to undo that
unnoticed. So each revocation is also appended to the `revocation` table as a hash chain (each
entry holds the previous entry's hash), and every host keeps the head it last saw, the number
of entries and the newest hash, in `AAT_HOME/revocation-head`. On every check a host looks at
the chain's length and newest hash; when they changed (or every `FULL_READ_S`) it reads the
whole chain again, checks every link and that its head is still there, and counts every
fingerprint in it as revoked. A chain that is shorter than the head, or whose entry at the
head has another hash, or whose links do not follow, was shortened or rewritten: the host says
so in one line in its log and stops deciding (every signed row counts as absent, so nobody
signs in, approves or calls `/mcp` with a token) until the chain is restored and it restarts.

A database writer can still drop the newest entries before any other host read them; the
revoking host's own file keeps them revoked there.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from pathlib import Path

from webplatform import keyfiles
from webplatform.platform import Platform
from webplatform.store.revocation_chain import GENESIS, Link, RevocationChain, link_hash
from webplatform.store.seals import Revocations

logger = logging.getLogger(__name__)

HEAD_FILE = "revocation-head"
FULL_READ_S = 10.0
BROKEN = (
    "the revocation record in the database was shortened or rewritten ({}): this host decides "
    "nothing until it is restored (AAT_HOME/revocation-head holds what this host saw)"
)


class ChainedRevocations:
    """This host's revocation file plus the database's chain (see the module)."""

    def __init__(self, platform: Platform, local: Revocations) -> None:
        self.chain = RevocationChain(platform.transact)
        self.local = local
        self.head_path = platform.settings.home / HEAD_FILE
        self._lock = threading.Lock()
        self._read_at = -math.inf
        self._fingerprints: frozenset[str] = frozenset()
        self._seen: tuple[int, str] = (-1, GENESIS)
        self.broken: str | None = None

    def __contains__(self, fingerprint: object) -> bool:
        """True when a row with this content was revoked on any host, or the chain is broken."""
        if fingerprint in self.local:
            return True
        chain = self._chain()
        return chain is None or fingerprint in chain

    def add(self, fingerprint: str) -> None:
        """Append `fingerprint` to this host's file, then to the chain, before the caller
        changes the database."""
        self.local.add(fingerprint)
        self.chain.append(fingerprint)
        with self._lock:
            self._read_at = -math.inf

    def _chain(self) -> frozenset[str] | None:
        with self._lock:
            if self.broken is not None:
                return None
        seen = self.chain.newest()
        with self._lock:
            fresh = time.monotonic() - self._read_at < FULL_READ_S
            if fresh and seen == self._seen:
                return self._fingerprints
        links = self.chain.links()
        problem = check_chain(links, self.head_path)
        with self._lock:
            if problem is not None:
                if self.broken is None:
                    logger.error(BROKEN.format(problem))
                self.broken = BROKEN.format(problem)
                return None
            self._fingerprints = frozenset(link[0] for link in links)
            self._seen = (len(links), links[-1][2] if links else GENESIS)
            self._read_at = time.monotonic()
            return self._fingerprints


def check_chain(links: list[Link], head_path: Path) -> str | None:
    """What is wrong with `links` against the head kept at `head_path`, or None; a longer
    chain that follows moves the head forward."""
    prev = GENESIS
    for n, (fingerprint, prev_hash, hash_) in enumerate(links, start=1):
        if prev_hash != prev or hash_ != link_hash(prev_hash, fingerprint):
            return f"entry {n} does not follow from the one before it"
        prev = hash_
    count, head = read_head(head_path)
    if len(links) < count:
        return f"it holds {len(links)} entries, this host saw {count}"
    if count and links[count - 1][2] != head:
        return f"entry {count} is not the one this host saw"
    if len(links) > count:
        text = f"{len(links)} {prev}\n".encode("ascii")
        keyfiles.write(head_path, text, mode=0o600)
    return None


def read_head(path: Path) -> tuple[int, str]:
    """(entries, newest hash) this host saw, or (0, GENESIS) before its first."""
    try:
        count, head = path.read_text(encoding="ascii").split()
        return int(count), head
    except FileNotFoundError:
        return 0, GENESIS
