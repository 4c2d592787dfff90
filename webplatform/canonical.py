"""Canonical JSON and the digests built on it."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no whitespace, non-ASCII kept as is: equal values, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str) -> str:
    """Hex sha256 of `text` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def args_digest(*, kind: str, name: str, action: str, args: dict[str, Any]) -> str:
    """The digest an approval is bound to: sha256 over canonical JSON of the exact call."""
    return sha256_hex(canonical_json({"kind": kind, "name": name, "action": action, "args": args}))
