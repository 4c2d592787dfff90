"""A row seal for tests that sign authority rows in the store alone (no AAT_HOME key)."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from webplatform.store.seals import RowSeal


def fresh_seal() -> RowSeal:
    """A seal with a key of its own, trusted by nothing else."""
    key = Ed25519PrivateKey.generate()
    return RowSeal(private=key, public=[key.public_key()])
