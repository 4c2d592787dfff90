"""Published tool names: `<namespace>_<tool>_<action>`, their budget, and the way back.

Every character outside `[a-zA-Z0-9_-]` becomes `_`, so `read.sheet` and `read_sheet` publish
the same name: the reverse mapping is therefore a lookup in the table of names this surface
actually publishes, never a guess that turns `_` back into `.` or `-`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from webplatform.surface.model import Key, PublishedTool

NAME_BUDGET = 64
_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")
NAMESPACE_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
SHORT_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$")


def sanitize(text: str) -> str:
    """`text` with every character outside `[a-zA-Z0-9_-]` replaced by `_`."""
    return _OUTSIDE.sub("_", text)


def forward_name(namespace: str, key: Key, short: str | None = None) -> str:
    """The published name of `key` in `namespace`; `short` replaces `<tool>_<action>`."""
    tail = short if short else f"{key.name}_{key.action}"
    return sanitize(f"{namespace}_{tail}")


def client_prefixes(server: str) -> dict[str, str]:
    """The prefixes clients put before a tool name, by client, for the server key `server`."""
    return {"opencode": f"{server}_", "claude-code": f"mcp__{server}__"}


def name_room(server: str) -> int:
    """The longest published name that still fits every client's budget."""
    return NAME_BUDGET - max(len(p) for p in client_prefixes(server).values())


@dataclass(frozen=True)
class NameClash:
    """Two or more keys that would publish the same name (compared case-insensitively)."""

    name: str
    keys: tuple[Key, ...]


class NameTable:
    """Published name <-> key for one surface, built from the declared tools."""

    def __init__(self, tools: Iterable[PublishedTool]) -> None:
        self._forward: dict[Key, str] = {}
        self._reverse: dict[str, Key] = {}
        folded: dict[str, list[Key]] = {}
        for tool in tools:
            name = forward_name(tool.namespace, tool.key, tool.short)
            self._forward[tool.key] = name
            folded.setdefault(name.lower(), []).append(tool.key)
        # Some clients fold case, so `Read-Sheet` and `read-sheet` clash too.
        self.clashes: tuple[NameClash, ...] = tuple(
            NameClash(self._forward[keys[0]], tuple(keys))
            for keys in folded.values()
            if len(set(keys)) > 1
        )
        clashing = {k for clash in self.clashes for k in clash.keys}
        self._reverse = {n: k for k, n in self._forward.items() if k not in clashing}

    def name(self, key: Key) -> str:
        """The published name of a declared key (KeyError when it is not declared)."""
        return self._forward[key]

    def key(self, name: str) -> Key | None:
        """The key a published name stands for, or None for a name this surface does not have."""
        return self._reverse.get(name)

    @property
    def names(self) -> list[str]:
        """Every published name that resolves, sorted."""
        return sorted(self._reverse)
