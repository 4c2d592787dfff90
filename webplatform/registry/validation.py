"""Argument validation shared by every surface: MCP calls, the dashboard's run form, `aat run`.

The rules are the action's typed model (`argmodel.ActionModel`, `ActionSpec.model`): one
set, so an agent, an operator and a script all get the same answer for the same call.
Errors name the argument, what was wrong and what would be right.
"""

from __future__ import annotations

from typing import Any

from webplatform.redaction import SECRET_MASK
from webplatform.registry.argmodel import ArgErrors, stated_facts
from webplatform.registry.model import ActionSpec, ArgSpec

__all__ = [
    "ArgErrors",
    "describe_arg",
    "mask_secrets",
    "parse_text_args",
    "secret_args_problem",
    "stated_facts",
    "validate_args",
    "with_defaults",
]


def describe_arg(arg: ArgSpec) -> dict[str, Any]:
    """An argument as a JSON-ready dict, name verbatim."""
    out: dict[str, Any] = {"name": arg.name, "type": arg.type, "required": arg.required}
    out.update(stated_facts(arg.description, arg.default, arg.enum))
    if arg.secret:
        out["secret"] = True
    return out


def validate_args(action: ActionSpec, args: Any) -> tuple[dict[str, Any], ArgErrors]:
    """Check `args` against the action's model; returns the call as the tool will receive it
    (`with_defaults`) and any problems.

    Nothing is coerced here: JSON callers must send JSON types. Text callers (forms, the
    command line) go through `parse_text_args` first.
    """
    return action.model.validate(args)


def with_defaults(action: ActionSpec, args: dict[str, Any]) -> dict[str, Any]:
    """The call as the tool will receive it (SPEC §20): every argument given, then every
    argument left out (or null) that has a default, with that default; what rules judge, the
    operator approves and the digest covers."""
    return action.model.with_defaults(args)


def parse_text_args(action: ActionSpec, raw: dict[str, str]) -> tuple[dict[str, Any], ArgErrors]:
    """Turn text values (form fields, `--name value`) into typed values, then validate them.

    Empty optional fields are dropped; unknown names are kept so `validate_args` names them.
    """
    return action.model.from_text(raw)


def mask_secrets(action: ActionSpec, args: dict[str, Any]) -> dict[str, Any]:
    """A copy of `args` with every secret argument's value replaced by a mask."""
    return {
        k: (SECRET_MASK if (a := action.arg(k)) is not None and a.secret else v)
        for k, v in args.items()
    }


def secret_args_problem(action: ActionSpec, args: dict[str, Any]) -> str | None:
    """Why a call passing values for arguments marked `secret` cannot wait in the approval
    queue (the queue stores its arguments), and what to do instead; None when it passes none."""
    secret = [a.name for a in action.args if a.secret and a.name in args]
    if not secret:
        return None
    return (
        f"secret argument(s) {', '.join(secret)} cannot wait in the approval queue; "
        "declare them under the tool's `secrets` and set them in the environment or keyring"
    )
