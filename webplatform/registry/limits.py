"""The manifest's `limits:` key (SPEC §20): what one call of a tool may use.

limits: {processes: 64, memory_mb: 512, file_mb: 256, open_files: 256}   # the defaults

Any key may be left out (it keeps its default); each is a positive whole number, lowered or
raised within the ceiling the operator sets (`AAT_MAX_PROCESSES`, `AAT_MAX_MEMORY_MB`,
`AAT_MAX_FILE_MB`, `AAT_MAX_OPEN_FILES`). The shape is checked with the manifest; the ceilings
depend on settings, so the loader checks them (`over_ceiling`) on every load.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from webplatform.config import Settings
from webplatform.registry.checks import Collector
from webplatform.registry.model import ToolLimits

LIMIT_KEYS = tuple(f.name for f in dataclasses.fields(ToolLimits))
# The setting that caps each key.
CEILING_SETTINGS = {
    "processes": "AAT_MAX_PROCESSES",
    "memory_mb": "AAT_MAX_MEMORY_MB",
    "file_mb": "AAT_MAX_FILE_MB",
    "open_files": "AAT_MAX_OPEN_FILES",
}
_EXAMPLE = "`limits: {processes: 64, memory_mb: 512, file_mb: 256, open_files: 256}`"


def tool_limits(check: Collector, data: dict[Any, Any]) -> ToolLimits:
    """The manifest's `limits:`; a wrong value is reported on `check` (and keeps its default)."""
    raw = data.get("limits")
    if raw is None:
        return ToolLimits()
    if not isinstance(raw, dict):
        check.fail(f"`limits` must be a mapping such as {_EXAMPLE}", ("limits",))
        return ToolLimits()
    check.unknown_keys(raw, LIMIT_KEYS, "`limits`", ("limits",))
    found: dict[str, int] = {}
    for key in LIMIT_KEYS:
        value = raw.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            check.fail(
                f"`limits.{key}` must be a positive whole number, not {value!r}",
                ("limits", key),
            )
            continue
        found[key] = value
    return ToolLimits(**found)


def over_ceiling(limits: ToolLimits, ceilings: ToolLimits) -> str | None:
    """One line naming each of `limits` above its ceiling and how to fix it; None if none is."""
    problems = [
        f"`limits.{key}: {getattr(limits, key)}` is above its ceiling of "
        f"{getattr(ceilings, key)} ({CEILING_SETTINGS[key]})"
        for key in LIMIT_KEYS
        if getattr(limits, key) > getattr(ceilings, key)
    ]
    if not problems:
        return None
    return "; ".join(problems) + "; lower it, or the operator raises the setting"


def ceilings(settings: Settings) -> ToolLimits:
    """The ceilings `settings` set (`AAT_MAX_*`), as limits."""
    return ToolLimits(
        processes=settings.max_processes,
        memory_mb=settings.max_memory_mb,
        file_mb=settings.max_file_mb,
        open_files=settings.max_open_files,
    )
