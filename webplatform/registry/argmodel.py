"""One typed model per action: the only place an action's arguments are turned into types.

An `ActionModel` is built once per action (lazily, on first use, and kept with the registry
snapshot as `ActionSpec.model`), from the manifest's `ArgSpec`s or from an upstream MCP
server's JSON Schema (SPEC §22, `model_from_json_schema`). Everything that needs to know what
an argument's type means asks it: validation of a call (a strict pydantic model, so `true` is
no integer and `"1"` no number), the defaults a call is completed with, text parsing for forms
and the command line, the JSON Schema offered to agents, the run form's widgets and what a
rule's condition may compare (`comparable`, `fits`).

Messages stay one line per problem and name the argument, what was wrong and what is right;
they are the same for an agent, an operator and a script.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    create_model,
)

from webplatform.registry.model import ARG_TYPE_RULES, ARG_TYPES, ArgSpec, ArgType, matches_type
from webplatform.suggest import did_you_mean

# Argument types a rule's condition can compare (SPEC §16; Cedar compares sets, not lists, so
# arrays and objects it cannot). Numbers reach the engine exactly (rule_values.number_proxy).
COMPARABLE_TYPES: Final[tuple[ArgType, ...]] = ("string", "integer", "number", "boolean")
Widget = Literal["text", "select", "checkbox", "integer", "number", "json", "password"]

# What each argument type is to pydantic: strict, so nothing is coerced (JSON callers send
# JSON types; text callers go through `ActionModel.from_text` first).
_PYDANTIC: Final[dict[ArgType, Any]] = {
    "string": StrictStr,
    "integer": StrictInt,
    "number": StrictInt | StrictFloat,
    "boolean": StrictBool,
    "array": Annotated[list[Any], Strict()],
    "object": Annotated[dict[Any, Any], Strict()],
}
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")
# The JSON Schema keys `args_from_json_schema` reads; others are kept in the original only.
_SCHEMA_TYPES: Final[dict[str, ArgType]] = {t: t for t in ARG_TYPES}


class UnsupportedSchema(ValueError):
    """A JSON Schema outside the subset an action's arguments can be: the message says where."""


class _NotInEnum(ValueError):
    """The value has the right type but is not one of the argument's choices."""


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


def property_schema(
    arg_type: ArgType, description: str, default: Any, enum: tuple[Any, ...] | None
) -> dict[str, Any]:
    """One argument as a JSON Schema property: its type and what it states."""
    return {"type": arg_type, **stated_facts(description, default, enum)}


def fits(arg_type: ArgType, value: Any) -> bool:
    """Whether a rule's constant `value` can be compared with an argument of `arg_type`: a
    value of that type (`true` is no integer, `1` is a number)."""
    return arg_type in COMPARABLE_TYPES and matches_type(value, arg_type)


def condition_problem(arg: ArgSpec, kind: str, values: Sequence[Any]) -> str | None:
    """Why a rule's condition (`equal`, `one_of`, `range` or `glob`, with its constants) cannot
    judge this argument's values, in one line; None when it can."""
    what = f"argument {arg.name!r} is {arg.type}"
    if not comparable(arg):
        return f"{what}: conditions can name only string, number, integer and boolean arguments"
    if kind == "range" and arg.type not in ("integer", "number"):
        return f"{what}: min and max need a number"
    if kind == "glob" and arg.type != "string":
        return f"{what}: a glob needs a string"
    if kind in ("equal", "one_of") and not all(fits(arg.type, v) for v in values):
        return f"{what}: compare it with a {arg.type}"
    return None


def comparable(arg: ArgSpec) -> bool:
    """Whether a rule's condition can name this argument (by its type)."""
    return arg.type in COMPARABLE_TYPES


_WIDGETS: Final[dict[ArgType, Widget]] = {
    "boolean": "checkbox",
    "integer": "integer",
    "number": "number",
    "array": "json",
    "object": "json",
}


def widget(arg: ArgSpec) -> Widget:
    """The run form's input for an argument: its choices, a checkbox, a number, JSON for an
    array or object, a password field for a secret, text otherwise."""
    if arg.enum is not None:
        return "select"
    return _WIDGETS.get(arg.type) or ("password" if arg.secret else "text")


def _field(arg: ArgSpec) -> tuple[Any, Any]:
    """The pydantic field of one argument: its strict type and its enum check."""
    kind: Any = _PYDANTIC[arg.type]
    if arg.enum is not None:
        kind = Annotated[kind, AfterValidator(_enum_check(arg.enum))]
    return kind, Field(... if arg.required else None, alias=arg.name)


def _enum_check(enum: tuple[Any, ...]) -> Any:
    def check(value: Any) -> Any:
        if value not in enum:
            raise _NotInEnum("not one of the choices")
        return value

    return check


class ActionModel:
    """An action's arguments as one typed model: validation, defaults, text parsing, its JSON
    Schema and the run form's widgets. `schema` is an upstream tool's own JSON Schema when
    the model was built from one; agents are offered it unchanged."""

    def __init__(self, args: Iterable[ArgSpec], schema: Mapping[str, Any] | None = None):
        self.args: tuple[ArgSpec, ...] = tuple(args)
        self._schema = dict(schema) if schema is not None else None
        self._by_name = {a.name: a for a in self.args}

    def arg(self, name: str) -> ArgSpec | None:
        """The argument called exactly `name`, or None."""
        return self._by_name.get(name)

    @cached_property
    def pydantic(self) -> type[BaseModel]:
        """The pydantic model: one strict field per argument, under its name verbatim (an
        alias, so `workspace-id` or `model_config` are names like any other); unknown names
        are refused."""
        fields = {f"a{i}": _field(arg) for i, arg in enumerate(self.args)}
        config = ConfigDict(extra="forbid", validate_by_alias=True, validate_by_name=False)
        model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            "ActionArguments", __config__=config, **fields
        )
        return model

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments, as offered to agents: an upstream tool's own, or
        the model's (properties by name, what each states, `required`, nothing else)."""
        if self._schema is not None:
            return copy.deepcopy(self._schema)
        return {
            "type": "object",
            "properties": {
                a.name: property_schema(a.type, a.description, a.default, a.enum) for a in self.args
            },
            "required": [a.name for a in self.args if a.required],
            "additionalProperties": False,
        }

    def validate(self, args: Any) -> tuple[dict[str, Any], ArgErrors]:
        """Check `args` (a JSON object; null values count as left out); returns the call as
        the tool will receive it (`with_defaults`) and any problems, one line each."""
        errors = ArgErrors()
        if args is None:
            args = {}
        if not isinstance(args, dict):
            errors.problems.append(
                f"args must be a JSON object of argument name to value, got {type(args).__name__}"
            )
            return {}, errors
        # A null is an argument left out; an unknown name is refused whatever its value.
        given = {k: v for k, v in args.items() if v is not None or k not in self._by_name}
        try:
            self.pydantic.model_validate(given)
        except ValidationError as exc:
            self._explain(exc, args, errors)
        return self.with_defaults(args), errors

    def _explain(self, exc: ValidationError, args: dict[str, Any], errors: ArgErrors) -> None:
        """The model's refusal as our lines: unknown names first (as sent), then each
        argument in the manifest's order."""
        wrong: dict[str, str] = {}
        unknown: set[Any] = set()
        for error in exc.errors():
            name = error["loc"][0] if error["loc"] else None
            if error["type"] == "extra_forbidden":
                unknown.add(name)
            elif isinstance(name, str):
                wrong.setdefault(name, _kind_of(error))
        known = [a.name for a in self.args]
        for name in args:
            if name in unknown:
                errors.problems.append(self._unknown(str(name), known, errors))
        for arg in self.args:
            if arg.name in wrong:
                errors.problems.append(_problem(arg, wrong[arg.name], args.get(arg.name)))

    @staticmethod
    def _unknown(name: str, known: list[str], errors: ArgErrors) -> str:
        near = did_you_mean(name, known)
        errors.did_you_mean[name] = near
        hint = f" (did you mean {', '.join(repr(n) for n in near)}?)" if near else ""
        valid = ", ".join(known) if known else "none"
        return f"unknown argument {name!r}{hint}; valid arguments: {valid}"

    def with_defaults(self, args: dict[str, Any]) -> dict[str, Any]:
        """The call as the tool will receive it (SPEC §20): every argument given, then every
        argument left out (or null) that has a default, with that default."""
        clean = {k: v for k, v in args.items() if v is not None}
        for arg in self.args:
            if arg.name not in clean and arg.default is not None:
                clean[arg.name] = arg.default
        return clean

    def from_text(self, raw: dict[str, str]) -> tuple[dict[str, Any], ArgErrors]:
        """Turn text values (form fields, `--name value`) into typed values, then validate.
        Empty optional fields are dropped; unknown names are kept so `validate` names them."""
        errors = ArgErrors()
        typed: dict[str, Any] = {}
        for name, text in raw.items():
            arg = self.arg(name)
            if arg is None:
                typed[name] = text
                continue
            if text == "" and not arg.required:
                continue
            try:
                typed[name] = _from_text(arg.type, text)
            except ValueError as exc:
                errors.problems.append(f"argument {name!r} {exc}")
        clean, more = self.validate(typed)
        errors.problems.extend(more.problems)
        errors.did_you_mean.update(more.did_you_mean)
        return clean, errors


def _kind_of(error: Any) -> str:
    if error["type"] == "missing":
        return "missing"
    ctx = error.get("ctx") or {}
    return "enum" if isinstance(ctx.get("error"), _NotInEnum) else "type"


def _problem(arg: ArgSpec, kind: str, value: Any) -> str:
    if kind == "missing":
        return f"missing required argument {arg.name!r} ({arg.type})"
    if kind == "enum":
        choices = ", ".join(json.dumps(e, ensure_ascii=False) for e in arg.enum or ())
        return f"argument {arg.name!r} must be one of {choices}"
    return (
        f"argument {arg.name!r} must be {ARG_TYPE_RULES[arg.type].described}, "
        f"got {json.dumps(value, ensure_ascii=False)[:60]}"
    )


def _from_text(arg_type: ArgType, text: str) -> Any:
    """The typed value of one text field; ValueError says what the type wants."""
    if arg_type == "string":
        return text
    wanted = ARG_TYPE_RULES[arg_type].described
    lowered = text.strip().lower()
    if arg_type == "boolean" and lowered in _TRUE + _FALSE:
        return lowered in _TRUE
    try:
        if arg_type == "integer":
            return int(text.strip())
        if arg_type == "number":
            return float(text.strip()) if any(c in text for c in ".eE") else int(text.strip())
        if arg_type != "boolean":
            return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"must be {wanted} in JSON ({exc.msg})") from None
    except ValueError:
        pass
    raise ValueError(f"must be {wanted}, got {text!r}")


def args_from_json_schema(schema: Any) -> tuple[ArgSpec, ...]:
    """The arguments an object JSON Schema describes (an upstream MCP tool's `inputSchema`):
    properties of type string, integer, number, boolean, array or object, with `enum` (or
    `const`), `default`, `description` and `required`. What generators write for an optional
    value counts as its type: a type list with `null`, an `anyOf`/`oneOf` of one type and
    `null`, a local `$ref`. Anything else raises `UnsupportedSchema`, one line naming the
    property. What the subset leaves out (`items`, `minimum`, patterns) the upstream checks."""
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise UnsupportedSchema("an input schema must be a JSON object schema of type object")
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        raise UnsupportedSchema("`properties` must be an object and `required` a list")
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return tuple(
        _arg_from_property(str(name), _resolved(str(name), prop, defs), name in required)
        for name, prop in properties.items()
    )


def _resolved(name: str, prop: Any, defs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The property with a local `$ref` followed and an optional value's `null` branch left
    out; its own description and default win over what it refers to."""
    if not isinstance(prop, Mapping):
        raise UnsupportedSchema(f"property {name!r} must be a JSON Schema object")
    ref = prop.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rsplit("/", 1)[-1]) if ref.startswith("#/") else None
        if not isinstance(target, Mapping):
            raise UnsupportedSchema(f"property {name!r} refers to {ref!r}, which is not here")
        return {**_resolved(name, target, {}), **{k: v for k, v in prop.items() if k != "$ref"}}
    for key in ("anyOf", "oneOf"):
        branches = prop.get(key)
        if isinstance(branches, list):
            others = [
                b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")
            ]
            if len(others) == 1:
                rest = {k: v for k, v in prop.items() if k != key}
                return {**_resolved(name, others[0], defs), **rest}
    if "const" in prop and "enum" not in prop:
        return {**prop, "enum": [prop["const"]]}
    return prop


def _arg_from_property(name: str, prop: Mapping[str, Any], required: bool) -> ArgSpec:
    kind = _schema_type(name, prop)
    enum = prop.get("enum")
    if enum is not None and not isinstance(enum, list):
        raise UnsupportedSchema(f"property {name!r}: `enum` must be a list")
    description = prop.get("description")
    return ArgSpec(
        name=name,
        type=kind,
        required=required,
        description=description if isinstance(description, str) else "",
        default=prop.get("default"),
        enum=tuple(e for e in enum if e is not None) if enum is not None else None,
    )


def _schema_type(name: str, prop: Mapping[str, Any]) -> ArgType:
    declared = prop.get("type")
    if declared is None and "enum" in prop:
        declared = _type_of_values(prop["enum"])
    if isinstance(declared, list):
        others = [t for t in declared if t != "null"]
        declared = others[0] if len(others) == 1 else None
    kind = _SCHEMA_TYPES.get(declared) if isinstance(declared, str) else None
    if kind is None:
        shown = json.dumps(prop.get("type", prop.get("anyOf", prop.get("oneOf"))))
        raise UnsupportedSchema(
            f"property {name!r} has type {shown[:80]}; supported: one of {', '.join(ARG_TYPES)}"
        )
    return kind


def _type_of_values(values: Any) -> ArgType | None:
    """The one type every choice of an untyped `enum` has (`null` aside), or None."""
    found = {
        next((t for t in ARG_TYPES if matches_type(v, t)), None)
        for v in (values if isinstance(values, list) else [None])
        if v is not None
    }
    if found == {"integer", "number"}:
        return "number"
    return found.pop() if len(found) == 1 else None


def model_from_json_schema(schema: Mapping[str, Any]) -> ActionModel:
    """The model of an upstream tool's `inputSchema` (SPEC §22): its arguments as
    `args_from_json_schema` reads them, and the schema itself, offered to agents unchanged."""
    return ActionModel(args_from_json_schema(schema), schema)
