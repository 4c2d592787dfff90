"""Closest-name suggestions that survive word order and plurals.

`credential-list` finds `list-credentials`: names are compared as sets of singularised
words first, and only then by edit similarity.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

_SPLIT = re.compile(r"[-_.\s/]+")


def singular(word: str) -> str:
    """A crude English singular: enough to match `sheets` with `sheet`, `entries` with `entry`."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def word_set(name: str) -> frozenset[str]:
    """The singularised, lower-cased words of a name split on `-`, `_`, `.`, `/` and spaces."""
    return frozenset(singular(w) for w in _SPLIT.split(name.lower()) if w)


def _stems(word: str) -> frozenset[str]:
    """Every form `word` could be the plural of: `buses` -> bus, `houses` -> house."""
    out = {word, singular(word)}
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        out.add(word[:-1])
    if len(word) > 4 and word.endswith("es"):
        out.add(word[:-2])
    if len(word) > 4 and word.endswith("ies"):
        out.add(word[:-3] + "y")
    return frozenset(out)


def _words(name: str) -> list[frozenset[str]]:
    return [_stems(w) for w in dict.fromkeys(_SPLIT.split(name.lower())) if w]


def _matched(query: list[frozenset[str]], candidate: list[frozenset[str]]) -> int:
    """How many words pair up (a word matches another when their stems meet), each used once."""
    best = 0

    def walk(i: int, used: frozenset[int], count: int) -> None:
        nonlocal best
        if count + len(query) - i <= best:
            return
        if i == len(query):
            best = count
            return
        for j, stems in enumerate(candidate):
            if j not in used and query[i] & stems:
                walk(i + 1, used | {j}, count + 1)
        walk(i + 1, used, count)

    walk(0, frozenset(), 0)
    return best


def _score(query: str, candidate: str) -> float:
    q, c = _words(query), _words(candidate)
    if len(q) > 8 or len(c) > 8:  # long names: spelling only, the pairing search stays cheap
        return difflib.SequenceMatcher(None, query.lower(), candidate.lower()).ratio()
    matched = _matched(q, c)
    if q and matched == len(q) == len(c):
        return 2.0
    union = len(q) + len(c) - matched
    overlap = matched / union if union else 0.0
    ratio = difflib.SequenceMatcher(None, query.lower(), candidate.lower()).ratio()
    return max(overlap + 0.5 if overlap >= 0.5 else 0.0, ratio)


MAX_QUERY_CHARS = 200


def did_you_mean(query: str, candidates: Iterable[str], *, limit: int = 3) -> list[str]:
    """Up to `limit` candidates closest to `query`, best first; empty when nothing is close."""
    if len(query) > MAX_QUERY_CHARS:
        # No real name is this long; comparing megabytes of it would only burn CPU.
        return []
    scored = [(_score(query, c), c) for c in set(candidates) if c != query]
    good = [(s, c) for s, c in scored if s >= 0.6]
    good.sort(key=lambda sc: (-sc[0], sc[1]))
    return [c for _, c in good[:limit]]
