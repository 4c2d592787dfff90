"""Argument validation shared by every surface: MCP calls, the dashboard's run form, `aat run`.

One set of rules, so an agent, an operator and a script all get the same answer for the
same call. Errors name the argument, what was wrong and what would be right.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from webplatform.redaction import SECRET_MASK
from webplatform.registry.model import ARG_TYPE_RULES, ActionSpec, ArgSpec, matches_type
from webplatform.suggest import did_you_mean


@dataclass
class ArgErrors:
    """Why a call's arguments were refused: one line per problem, plus suggestions."""

    problems: list[str] = field(default_factory=list)
    did_you_mean: dict[str, list[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.problems)

    @property
    def line(self) -> str:
        """All problems on one line."""
        return "; ".join(self.problems)


def describe_arg(arg: ArgSpec) -> dict[str, Any]:
    """An argument as a JSON-ready dict, name verbatim."""
    out: dict[str, Any] = {"name": arg.name, "type": arg.type, "required": arg.required}
    out.update(stated_facts(arg.description, arg.default, arg.enum))
    if arg.secret:
        out["secret"] = True
    return out


def stated_facts(description: str, default: Any, enum: tuple[Any, ...] | None) -> dict[str, Any]:
    """What an argument says only when it has it (description, default, enum), JSON-ready:
    the same keys in `capabilities` and in a published tool's JSON Schema."""
    out: dict[str, Any] = {}
    if description:
        out["description"] = description
    if default is not None:
        out["default"] = default
    if enum is not None:
        out["enum"] = list(enum)
    return out


def validate_args(action: ActionSpec, args: Any) -> tuple[dict[str, Any], ArgErrors]:
    """Check `args` against the action's schema; returns the arguments and any problems.

    Nothing is coerced here: JSON callers must send JSON types. Text callers (forms, the
    command line) go through `parse_text_args` first.
    """
    errors = ArgErrors()
    if args is None:
        args = {}
    if not isinstance(args, dict):
        errors.problems.append(
            f"args must be a JSON object of argument name to value, got {type(args).__name__}"
        )
        return {}, errors
    known = [a.name for a in action.args]
    for name in args:
        if action.arg(name) is None:
            near = did_you_mean(name, known)
            errors.did_you_mean[name] = near
            hint = f" (did you mean {', '.join(repr(n) for n in near)}?)" if near else ""
            valid = ", ".join(known) if known else "none"
            errors.problems.append(f"unknown argument {name!r}{hint}; valid arguments: {valid}")
    for arg in action.args:
        if arg.name not in args or args[arg.name] is None:
            if arg.required:
                errors.problems.append(f"missing required argument {arg.name!r} ({arg.type})")
            continue
        value = args[arg.name]
        if not matches_type(value, arg.type):
            errors.problems.append(
                f"argument {arg.name!r} must be {ARG_TYPE_RULES[arg.type].described}, "
                f"got {json.dumps(value, ensure_ascii=False)[:60]}"
            )
        elif arg.enum is not None and value not in arg.enum:
            choices = ", ".join(json.dumps(e, ensure_ascii=False) for e in arg.enum)
            errors.problems.append(f"argument {arg.name!r} must be one of {choices}")
    return with_defaults(action, args), errors


def with_defaults(action: ActionSpec, args: dict[str, Any]) -> dict[str, Any]:
    """The call as the tool will receive it (SPEC §20): every argument given, then every
    argument left out (or null) that has a default, with that default; what rules judge, the
    operator approves and the digest covers."""
    clean = {k: v for k, v in args.items() if v is not None}
    for arg in action.args:
        if arg.name not in clean and arg.default is not None:
            clean[arg.name] = arg.default
    return clean


def parse_text_args(action: ActionSpec, raw: dict[str, str]) -> tuple[dict[str, Any], ArgErrors]:
    """Turn text values (form fields, `--name value`) into typed values, then validate them.

    Empty optional fields are dropped; unknown names are kept so `validate_args` names them.
    """
    errors = ArgErrors()
    typed: dict[str, Any] = {}
    for name, text in raw.items():
        arg = action.arg(name)
        if arg is None:
            typed[name] = text
            continue
        if text == "" and not arg.required:
            continue
        try:
            typed[name] = _from_text(arg, text)
        except ValueError as exc:
            errors.problems.append(f"argument {name!r} {exc}")
    clean, more = validate_args(action, typed)
    errors.problems.extend(more.problems)
    errors.did_you_mean.update(more.did_you_mean)
    return clean, errors


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def _from_text(arg: ArgSpec, text: str) -> Any:
    """The typed value of one text field; ValueError says what the type wants."""
    if arg.type == "string":
        return text
    wanted = ARG_TYPE_RULES[arg.type].described
    lowered = text.strip().lower()
    if arg.type == "boolean" and lowered in _TRUE + _FALSE:
        return lowered in _TRUE
    try:
        if arg.type == "integer":
            return int(text.strip())
        if arg.type == "number":
            return float(text.strip()) if any(c in text for c in ".eE") else int(text.strip())
        if arg.type != "boolean":
            return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"must be {wanted} in JSON ({exc.msg})") from None
    except ValueError:
        pass
    raise ValueError(f"must be {wanted}, got {text!r}")


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
