"""A call's arguments as its approval card shows them (SPEC §25): in the manifest's order
(as the run form's confirm page), the short ones first, strings as the text they are (line
breaks kept), other values as JSON; and, when the whole does not fit the card, every
argument still named, with as much of each as fits, the recipient-like ones served first so
they are never the ones dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# A value this long or with a line break is shown after the short ones.
SHORT_CHARS = 80
# Names that say where a call goes or whom it reaches: shown first when space is short.
RECIPIENT_LIKE = frozenset(
    {
        *("to", "cc", "bcc", "recipient", "recipients", "email", "address", "channel"),
        *("url", "host", "hostname", "path", "destination", "target", "account", "phone"),
        *("user", "username", "repo", "repository", "branch", "file", "files", "dest"),
    }
)


@dataclass(frozen=True)
class ShownArg:
    """One argument on a card: its name, what is shown of its value, and how long it is."""

    name: str
    # The string itself, or the JSON of any other value; cut to what fits.
    text: str
    # Whether the value is a string (shown as text, not as JSON).
    string: bool
    # How many characters the whole value has.
    chars: int

    @property
    def clipped(self) -> bool:
        """Whether the card shows less than the whole value."""
        return len(self.text) < self.chars


def recipient_like(name: str) -> bool:
    """Whether argument `name` says where the call goes or whom it reaches."""
    key = name.lower().replace("-", "_")
    return key in RECIPIENT_LIKE or key.split("_")[-1] in RECIPIENT_LIKE


def _text(value: Any) -> tuple[str, bool]:
    if isinstance(value, str):
        return value, True
    return json.dumps(value, ensure_ascii=False, indent=None), False


def _order(values: Mapping[str, Any], manifest: Iterable[str]) -> list[str]:
    """The manifest's order, then any other names alphabetically; the short ones first."""
    known = [n for n in manifest if n in values]
    names = known + sorted(n for n in values if n not in known)

    def long(name: str) -> bool:
        text, _ = _text(values[name])
        return len(text) > SHORT_CHARS or "\n" in text

    return sorted(names, key=long)  # stable: each group keeps the manifest's order


def shown_args(values: Mapping[str, Any], manifest: Iterable[str], budget: int) -> list[ShownArg]:
    """`values` in the card's order, together cut to at most `budget` characters: recipient-
    like arguments get the budget first, then the others in the order shown."""
    order = _order(values, manifest)
    texts = {name: _text(values[name]) for name in order}
    first = [n for n in order if recipient_like(n)] + [n for n in order if not recipient_like(n)]
    left, given = budget, {}
    for name in first:
        text, _ = texts[name]
        given[name] = min(len(text), max(left, 0))
        left -= given[name]
    return [
        ShownArg(name=n, text=texts[n][0][: given[n]], string=texts[n][1], chars=len(texts[n][0]))
        for n in order
    ]


def parse_args(text: str) -> dict[str, Any] | None:
    """A job's arguments JSON as a mapping, or None when it is not a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
