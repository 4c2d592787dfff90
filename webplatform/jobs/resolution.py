"""Naming a call: the tool or agent and the action a call means, and the schema agents see.

Every surface resolves a call here first, so an unknown name gets the same did-you-mean
answer everywhere.
"""

from __future__ import annotations

from typing import Any

from webplatform.jobs.answers import Refusal, Status
from webplatform.registry.model import ActionSpec, Registry, RunnableKind, ToolSpec
from webplatform.registry.validation import describe_arg
from webplatform.suggest import did_you_mean


def resolve_call(
    registry: Registry, kind: RunnableKind, name: str, action: str | None
) -> tuple[ToolSpec, ActionSpec]:
    """The tool and action a call names; else `Refusal` with an `invalid` answer saying how to
    fix the call."""
    spec = registry.runnable(kind, name)
    if kind == "tool" and (held := _held(registry, name, action)) is not None:
        raise Refusal(Status.invalid, tool=name, action=action, error=held)
    if spec is None:
        known = sorted(registry.runnables(kind))
        near = did_you_mean(name, known)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise Refusal(
            Status.invalid,
            tool=name,
            error=f"unknown {kind} {name!r}{hint}; call capabilities to list every {kind}",
            did_you_mean=near or None,
        )
    names = [a.name for a in spec.actions]
    if action is None or action == "":
        if len(spec.actions) == 1:
            return spec, spec.actions[0]
        raise Refusal(
            Status.invalid,
            tool=name,
            error=(
                f"{kind} {name!r} has {len(names)} actions; pass action: one of {', '.join(names)}"
            ),
            did_you_mean=names,
        )
    act = spec.action(action)
    if act is None:
        near = did_you_mean(action, names)
        hint = f" did you mean {', '.join(near)}?" if near else ""
        raise Refusal(
            Status.invalid,
            tool=name,
            action=action,
            error=f"{kind} {name!r} has no action {action!r};{hint} actions: {', '.join(names)}",
            did_you_mean=near or None,
        )
    return spec, act


def _held(registry: Registry, name: str, action: str | None) -> str | None:
    """Why a call of an upstream server's tool may not go on (SPEC §22): its definition is
    new or changed and no admin accepted it, or the server has no accepted tool; or None."""
    if name not in registry.servers:
        return None
    if action and action in registry.held.get(name, ()):
        return (
            f"{name} {action} is held: its definition is new, or changed since an admin "
            f"accepted it; nothing is sent until an admin runs `aat servers accept {name}`"
        )
    if registry.runnable("tool", name) is None:
        return (
            f"server {name!r} has no accepted tools yet; an admin lists them with "
            f"`aat servers show {name}` and accepts them with `aat servers accept {name}`"
        )
    return None


def action_schema(action: ActionSpec) -> list[dict[str, Any]]:
    """The argument schema of an action, as agents are shown it."""
    return [describe_arg(a) for a in action.args]
