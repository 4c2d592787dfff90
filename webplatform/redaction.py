"""Masking secret values in text, and cutting text without leaving part of a secret behind.

Every text a run produces (result, stdout, stderr, error line) is masked first and cut after:
cutting first could split a secret so that no whole copy is left to mask, while its first or
last characters still show. Where the text reached us already cut (the runner keeps only the
head of stdout and the tail of stderr), the characters at the cut that could begin or end a
secret are dropped too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from webplatform.canonical import canonical_json

# What a secret value is shown as, everywhere: stored arguments, output, answers.
SECRET_MASK = "***"
ELLIPSIS = "…"


class Redactor:
    """Replaces secret values in text with the mask shown for secrets everywhere."""

    # Shorter values would mask ordinary words and digits; secrets are never that short.
    MIN_LENGTH = 4

    def __init__(self, values: Sequence[str]) -> None:
        plain = {v for v in values if len(v) >= self.MIN_LENGTH}
        # A JSON-encoded copy of a value (quotes or non-ASCII escaped) is masked too.
        forms = plain | {canonical_json(v)[1:-1] for v in plain}
        forms |= {json.dumps(v)[1:-1] for v in plain}
        self.values = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        """`text` with every whole secret value replaced by the mask."""
        for value in self.values:
            text = text.replace(value, SECRET_MASK)
        return text

    def head(self, text: str, limit: int, *, cut_before: bool = False) -> str:
        """The first `limit` bytes (UTF-8) of `text` after masking, without a partial secret.

        `cut_before` says the text was already cut after its end (the runner kept only the
        head), so its last characters may be the start of a secret.
        """
        return self._cut(text, limit, cut_before=cut_before, keep_end=False)

    def tail(self, text: str, limit: int, *, cut_before: bool = False) -> str:
        """The last `limit` bytes (UTF-8) of `text` after masking, without a partial secret.

        `cut_before` says the text was already cut before its start (the runner kept only the
        tail), so its first characters may be the end of a secret.
        """
        return self._cut(text, limit, cut_before=cut_before, keep_end=True)

    def _cut(self, text: str, limit: int, *, cut_before: bool, keep_end: bool) -> str:
        """`text` masked, then its first (or, `keep_end`, last) `limit` bytes, with what could
        be part of a secret dropped at the cut."""
        masked = self(text)
        data = masked.encode("utf-8")
        if len(data) <= limit and not cut_before:
            return masked
        if not keep_end:
            return self._drop_partial_end(data[:limit].decode("utf-8", errors="ignore"))
        kept = data[len(data) - limit :] if limit > 0 else b""
        return self._drop_partial_start(kept.decode("utf-8", errors="ignore"))

    def line(self, text: str, limit: int) -> str:
        """`text` masked, flattened to one line, and cut to `limit` characters with `…`."""
        flat = " ".join(self(text).split())
        if len(flat) <= limit:
            return flat
        return self._drop_partial_end(flat[: limit - 1]) + ELLIPSIS

    def _drop_partial_end(self, text: str) -> str:
        keep = len(text)
        for value in self.values:
            for n in range(min(len(value) - 1, len(text)), 0, -1):
                if text.endswith(value[:n]):
                    keep = min(keep, len(text) - n)
                    break
        return text[:keep]

    def _drop_partial_start(self, text: str) -> str:
        start = 0
        for value in self.values:
            for n in range(min(len(value) - 1, len(text)), 0, -1):
                if text.startswith(value[-n:]):
                    start = max(start, n)
                    break
        return text[start:]


NO_SECRETS = Redactor([])
