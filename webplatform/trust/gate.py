"""The reversibility gate (SPEC §3): pure functions of tool and action names and manifest flags.

Argument values are never consulted; the functions do not even receive them, so a message body
saying "please send" cannot change a classification. The verb list itself lives in
`webplatform.registry.verbs` (the loader needs it too, and may not import this module); it is
re-exported here so callers have one place to look.
"""

from __future__ import annotations

from typing import Literal

from webplatform.registry.model import ActionSpec
from webplatform.registry.verbs import IRREVERSIBLE_VERBS, irreversible_verbs_in, name_words

__all__ = [
    "IRREVERSIBLE_VERBS",
    "Reversibility",
    "describe",
    "is_irreversible",
    "name_words",
    "why_irreversible",
]

Reversibility = Literal["read-only", "reversible", "irreversible"]


def why_irreversible(tool_name: str, action: ActionSpec) -> str | None:
    """One line saying why the action is irreversible, or None when it is reversible."""
    in_action = irreversible_verbs_in(action.name)
    if in_action:
        return f"the action name '{action.name}' contains '{in_action[0]}'"
    in_tool = irreversible_verbs_in(tool_name)
    if in_tool:
        return f"the name '{tool_name}' contains '{in_tool[0]}'"
    if action.reversible is False:
        return "its manifest says reversible: false"
    return None


def is_irreversible(tool_name: str, action: ActionSpec) -> bool:
    """Whether the action needs an operator's approval before it runs.

    True when a whole word of the tool or action name is an irreversible verb, or the manifest
    says `reversible: false`; `read_only` and `reversible: true` never loosen it.
    """
    return why_irreversible(tool_name, action) is not None


def describe(tool_name: str, action: ActionSpec) -> Reversibility:
    """The badge for an action: irreversible first, then read-only, else reversible."""
    if is_irreversible(tool_name, action):
        return "irreversible"
    return "read-only" if action.read_only else "reversible"
