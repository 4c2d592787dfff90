"""Shared checks for manifests and skills: one error collector that knows each value's line."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from webplatform.registry.model import Kind, ManifestError
from webplatform.registry.yamldoc import YamlDoc

NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]*")

Where = tuple[str | int, ...]


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """` (did you mean 'x'?)` for a close choice, else the list of choices, for error messages."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if close:
        return f"; did you mean '{close[0]}'?"
    return f"; use one of: {', '.join(choices)}"


def suggest_name(raw: str) -> str:
    """The nearest valid tool/agent/skill name to `raw` (`My_Tool` -> `my-tool`)."""
    return re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-") or "my-tool"


class Collector:
    """Gathers every problem in one file, each with the line of the value it is about.

    Reporting all problems at once, rather than the first, saves the author a round trip
    through `aat check` per mistake.
    """

    def __init__(self, kind: Kind, name: str, path: Path, doc: YamlDoc | None = None) -> None:
        self.kind = kind
        self.name = name
        self.path = path
        self.doc = doc
        self.errors: list[ManifestError] = []

    def fail(self, message: str, where: Where = (), *, line: int | None = None) -> None:
        """Record one problem; `where` is the key path whose line it is reported on."""
        if line is None and self.doc is not None:
            line = self.doc.line(*where)
        self.errors.append(ManifestError(self.kind, self.name, self.path, message, line))

    def unknown_keys(
        self, mapping: dict[Any, Any], allowed: Sequence[str], label: str, where: Where
    ) -> None:
        """Reject keys outside `allowed`: a typo like `descripton` must not be silently ignored."""
        for key in mapping:
            if str(key) not in allowed:
                hint = did_you_mean(str(key), allowed)
                self.fail(f"unknown key '{key}' in {label}{hint}", (*where, str(key)))

    def text(
        self, mapping: dict[Any, Any], key: str, label: str, where: Where, *, required: bool
    ) -> str | None:
        """A string value; a missing required one or a non-string is an error."""
        value = mapping.get(key)
        if value is None or (isinstance(value, str) and not value.strip() and required):
            if required:
                self.fail(f"{label} has no `{key}`; add `{key}: ...`", (*where, key))
            return None
        if not isinstance(value, str):
            self.fail(f"`{key}` of {label} must be text; put it in quotes", (*where, key))
            return None
        return value

    def flag(self, mapping: dict[Any, Any], key: str, label: str, where: Where) -> bool | None:
        """An optional true/false value (None when absent)."""
        value = mapping.get(key)
        if value is None or isinstance(value, bool):
            return value
        self.fail(f"`{key}` of {label} must be true or false, not {value!r}", (*where, key))
        return None

    def folder_name(self, mapping: dict[Any, Any], folder: str, label: str) -> str | None:
        """The `name:` field: required, a valid name, and equal to its folder's name."""
        name = self.text(mapping, "name", label, (), required=True)
        if name is None:
            return None
        if not NAME_RE.fullmatch(name):
            self.fail(
                f"name '{name}' is not valid: use lowercase letters, digits and '-', "
                f"starting with a letter or digit (e.g. '{suggest_name(name)}')",
                ("name",),
            )
            return None
        if name != folder:
            self.fail(
                f"name '{name}' does not match its folder '{folder}'; "
                f"set `name: {folder}` or rename the folder to '{name}'",
                ("name",),
            )
            return None
        return name
