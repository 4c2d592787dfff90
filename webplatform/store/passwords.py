"""Operator passwords: argon2id hashes (argon2-cffi's defaults), never the password itself."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from argon2 import PasswordHasher


@functools.cache
def _hasher() -> PasswordHasher:
    # argon2 (and its cffi backend) loads on the first password, not with the store: the
    # MCP bridge and the worker never check one.
    from argon2 import PasswordHasher

    return PasswordHasher()


def hash_password(password: str) -> str:
    """An argon2id hash of `password`, salted, in the standard `$argon2id$...` encoding."""
    return str(_hasher().hash(password))


def verify_password(password_hash: str, password: str) -> bool:
    """True when `password` matches `password_hash`. Never raises for a wrong or bad hash.

    argon2 compares in constant time; a malformed hash counts as a mismatch.
    """
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        return bool(_hasher().verify(password_hash, password))
    except (VerificationError, InvalidHashError):  # a mismatch is a VerificationError too
        return False


def needs_rehash(password_hash: str) -> bool:
    """True when the hash was made with weaker parameters than today's defaults."""
    from argon2.exceptions import InvalidHashError

    try:
        return bool(_hasher().check_needs_rehash(password_hash))
    except (InvalidHashError, ValueError):
        return True
