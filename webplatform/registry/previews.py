"""`preview:` links between actions of one manifest (SPEC §16), checked once all are read.

An irreversible action may name a read-only action of the same tool that prints what it
would do. aat runs that action, unasked, as soon as the call is queued, with the call's
arguments: so it must be read-only (it runs before anyone approved anything), and it must
accept every argument the irreversible action accepts, of the same type.
"""

from __future__ import annotations

from collections.abc import Sequence

from webplatform.registry.checks import did_you_mean
from webplatform.registry.model import ActionSpec, ArgSpec
from webplatform.registry.verbs import irreversible_verbs_in


def is_irreversible(tool_name: str, action: ActionSpec) -> bool:
    """The gate's rule (`webplatform.trust.gate`), which the registry may not import."""
    return bool(irreversible_verbs_in(tool_name, action.name)) or action.reversible is False


def preview_problems(tool_name: str, actions: Sequence[ActionSpec]) -> dict[str, str]:
    """What is wrong with each action's `preview:`, by the name of the action that has it."""
    by_name = {a.name: a for a in actions}
    problems: dict[str, str] = {}
    for action in actions:
        if action.preview is not None:
            problem = _link_problem(tool_name, action, action.preview, by_name)
            if problem:
                problems[action.name] = problem
    return problems


def _link_problem(
    tool_name: str, action: ActionSpec, name: str, by_name: dict[str, ActionSpec]
) -> str | None:
    label = f"`preview: {name}` of action '{action.name}'"
    if not is_irreversible(tool_name, action):
        return (
            f"{label}: only an irreversible action has a preview (it shows the operator what "
            "approving would do); remove `preview` or make the action irreversible"
        )
    if name == action.name:
        return (
            f"{label}: an action cannot preview itself (that would run it before it is "
            "approved); name a read-only action that prints what it would do"
        )
    target = by_name.get(name)
    if target is None:
        others = [a for a in by_name if a != action.name]
        return f"{label} names no action of this tool{did_you_mean(name, others or ['...'])}"
    if not target.read_only:
        return (
            f"{label}: '{name}' must be read-only, since aat runs it before anyone approves; "
            f"add `read_only: true` to '{name}'"
        )
    return _args_problem(label, action, target)


def _args_problem(label: str, action: ActionSpec, target: ActionSpec) -> str | None:
    """Whether every call of `action` is a valid call of its preview `target`."""
    for arg in action.args:
        theirs = target.arg(arg.name)
        if theirs is None:
            return (
                f"{label}: '{target.name}' does not take argument '{arg.name}', which "
                f"'{action.name}' takes; give '{target.name}' the same arguments"
            )
        problem = _arg_problem(arg, theirs)
        if problem:
            return f"{label}: argument '{arg.name}' {problem}"
    for theirs in target.args:
        ours = action.arg(theirs.name)
        if theirs.required and (ours is None or not ours.required):
            return (
                f"{label}: '{target.name}' requires argument '{theirs.name}', which "
                f"'{action.name}' can be called without; make it optional in '{target.name}'"
            )
    return None


def _arg_problem(ours: ArgSpec, theirs: ArgSpec) -> str | None:
    """Why a value valid for `ours` may be refused by `theirs`, or None."""
    widened = ours.type == "integer" and theirs.type == "number"
    if ours.type != theirs.type and not widened:
        return f"is {ours.type} in the action but {theirs.type} in its preview; use one type"
    if theirs.enum is not None and (
        ours.enum is None or any(value not in theirs.enum for value in ours.enum)
    ):
        return (
            "takes values in the action that its preview's `enum` refuses; "
            "give the preview the same `enum` (or none)"
        )
    return None
