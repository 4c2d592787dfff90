"""Operator passwords: argon2id hashes (argon2-cffi's defaults), never the password itself."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

_hasher = PasswordHasher()


def hash_password(password: str) -> str:
    """An argon2id hash of `password`, salted, in the standard `$argon2id$...` encoding."""
    return str(_hasher.hash(password))


def verify_password(password_hash: str, password: str) -> bool:
    """True when `password` matches `password_hash`. Never raises for a wrong or bad hash.

    argon2 compares in constant time; a malformed hash counts as a mismatch.
    """
    try:
        return bool(_hasher.verify(password_hash, password))
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """True when the hash was made with weaker parameters than today's defaults."""
    try:
        return bool(_hasher.check_needs_rehash(password_hash))
    except (InvalidHashError, ValueError):
        return True
