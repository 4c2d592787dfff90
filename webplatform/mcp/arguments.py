"""The seven tools' arguments: one pydantic model each, the SDK's own way.

A model is both what clients see (`inputSchema`, derived by `model_json_schema`) and what
checks a call: the SDK validates the arguments against it before the tool function runs
(`FuncMetadata.validate_arguments`) and hands the function the validated model. A call the
model refuses is answered by `refusal`: an `invalid` answer that names the wrong argument,
says how to fix it, and suggests the closest names for unknown ones (SPEC section 5).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Final, TypeAlias

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.context_injection import find_context_parameter
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema

from webplatform.jobs.answers import Answer, Status
from webplatform.mcp import naming
from webplatform.mcp.protocol import without_client_added
from webplatform.registry.model import RunnableKind
from webplatform.suggest import did_you_mean
from webplatform.trust.policy import REASON_MAX_CHARS, reason_problem

# Text that may be left out or sent as null; the schema advertises only the string.
Text: TypeAlias = str | SkipJsonSchema[None]
# The most of a wrong name an answer repeats.
_SHOWN: Final = 100


def _as_advertised(schema: JsonDict) -> None:
    """The schema as clients see it: pydantic's generated titles, `default: null` and the
    class docstring left out (noise in every client's context), `required` always present,
    and no `additionalProperties: false`: arguments clients add on their own are dropped,
    not refused, so the schema must not forbid them."""
    for generated in ("title", "description", "additionalProperties"):
        schema.pop(generated, None)
    schema.setdefault("required", [])
    properties = schema.get("properties")
    assert isinstance(properties, dict)
    for prop in properties.values():
        assert isinstance(prop, dict)
        prop.pop("title", None)
        if "default" in prop and prop["default"] is None:
            del prop["default"]


class Arguments(ArgModelBase):
    """One tool's arguments. Unknown names are refused (client-added ones dropped first);
    the tool function receives the validated model whole, as `arguments`."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_as_advertised)

    # For a field that fails, the one line that says how to fix it, from the value sent.
    fixes: ClassVar[Mapping[str, Callable[[Any], str]]] = {}

    @model_validator(mode="before")
    @classmethod
    def _drop_client_added(cls, data: Any) -> Any:
        return without_client_added(data, cls.names()) if isinstance(data, dict) else data

    def model_dump_one_level(self) -> dict[str, Any]:
        """The keyword arguments the SDK calls the tool function with: the model itself, so
        a function reads typed fields (`arguments.job`) under the names Python knows them by
        (`name`, sent as `tool` or `agent`)."""
        return {"arguments": self}

    @classmethod
    def names(cls) -> list[str]:
        """The argument names as clients spell them, in the schema's order."""
        return [f.alias or n for n, f in cls.model_fields.items()]


def _optional(description: str) -> Any:
    """A field that may be left out (or sent as null); null is not advertised."""
    return Field(None, description=description)


class CapabilitiesArguments(Arguments):
    """`capabilities {kind?, name?, action?, search?}`."""

    kind: naming.Kind | SkipJsonSchema[None] = _optional("limit to one kind")
    name: Text = _optional("a tool, agent or skill name: its full schema")
    action: Text = _optional("with name: one action's args and call shape")
    search: Text = _optional("words to find in action names and descriptions")

    fixes: ClassVar[Mapping[str, Callable[[Any], str]]] = {
        "kind": lambda v: f"kind must be one of {', '.join(naming.KINDS)}, got {v!r:.{_SHOWN}}",
        "name": lambda _: "name must be a string",
        "action": lambda _: "action must be a string",
        "search": lambda _: "search must be a string",
    }


class GetSkillArguments(Arguments):
    """`get_skill {name}`."""

    name: str = Field(description="the skill's name")

    fixes: ClassVar[Mapping[str, Callable[[Any], str]]] = {
        "name": lambda _: (
            "get_skill needs name: the skill's name (a string); call capabilities with "
            "kind=skill to list every skill"
        ),
    }


def _digits_to_int(value: Any) -> Any:
    """Some clients send numbers as text: a job id of digits is that integer."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


class JobStatusArguments(Arguments):
    """`job_status {job?, wait_s?}`."""

    job: Annotated[StrictInt | SkipJsonSchema[None], BeforeValidator(_digits_to_int)] = _optional(
        "the job id from a run result; leave out to list your recent jobs"
    )
    wait_s: Annotated[StrictFloat, Field(ge=0)] | SkipJsonSchema[None] = _optional(
        "wait up to this many seconds for the job to change (capped)"
    )

    fixes: ClassVar[Mapping[str, Callable[[Any], str]]] = {
        "job": lambda _: (
            "job must be the integer job id from a run result (leave it out to list your "
            "recent jobs)"
        ),
        "wait_s": lambda _: "wait_s must be a number of seconds, 0 or more",
    }


def _registry_name(name: str) -> str:
    if not naming.valid_name(name):
        raise ValueError("not a registry name")
    return name


# A tool or agent name as manifests allow them (`../x` names nothing); not advertised.
RegistryName: TypeAlias = Annotated[str, AfterValidator(_registry_name)]


def _reason_fix(value: Any) -> str:
    return reason_problem(value) or "reason must be text (why you want this call)"


class RunArguments(Arguments):
    """`run_{kind} {<kind>, action?, args?}`; `name` is sent as `tool` or `agent` (`kind`)."""

    tool_name: ClassVar[str] = naming.RUN_TOOL
    kind: ClassVar[RunnableKind] = "tool"

    name: RegistryName = Field(alias="tool")
    action: Text = None
    args: dict[str, Any] | SkipJsonSchema[None] = Field(
        None,
        description=(
            "argument name -> value, names verbatim as capabilities shows them "
            '(e.g. {"max-results": 10})'
        ),
    )

    fixes: ClassVar[Mapping[str, Callable[[Any], str]]] = {
        "action": lambda _: "action must be a string",
        "args": lambda _: "args must be an object: argument name -> value",
        "reason": _reason_fix,
    }

    @classmethod
    def _name_fix(cls, value: Any) -> str:
        kind = cls.kind
        if not isinstance(value, str) or not value:
            return f"{cls.tool_name} needs {kind}: the {kind}'s name (a string)"
        return (
            f"{value[:_SHOWN]!r} is not a {kind} name (lower-case letters, digits and -); "
            f"call capabilities to list every {kind}"
        )


class ConfirmedRunArguments(RunArguments):
    """`run_{kind}_confirmed`: a run's arguments and the agent's reason for the operator."""

    reason: Annotated[str, Field(max_length=REASON_MAX_CHARS)] | SkipJsonSchema[None] = _optional(
        "why you want this call, in a sentence or two (at most 500 characters); the "
        "operator who decides reads it on the approval card"
    )


def _run_arguments(tool: str, kind: RunnableKind, base: type[RunArguments]) -> type[RunArguments]:
    """`base` for `kind`: the name sent as `kind`, descriptions that say `kind`."""
    model = create_model(
        f"{base.__name__}_{kind}",
        __base__=base,
        name=(
            RegistryName,
            Field(alias=kind, description=f"the {kind}'s name, as listed by capabilities"),
        ),
        action=(
            Text,
            _optional(f"the action to run; may be left out when the {kind} has one action"),
        ),
    )
    model.tool_name, model.kind = tool, kind
    model.fixes = {**base.fixes, kind: model._name_fix}
    return model


MODELS: Final[dict[str, type[Arguments]]] = {
    naming.CAPABILITIES: CapabilitiesArguments,
    naming.RUN_TOOL: _run_arguments(naming.RUN_TOOL, "tool", RunArguments),
    naming.RUN_AGENT: _run_arguments(naming.RUN_AGENT, "agent", RunArguments),
    naming.RUN_TOOL_CONFIRMED: _run_arguments(
        naming.RUN_TOOL_CONFIRMED, "tool", ConfirmedRunArguments
    ),
    naming.RUN_AGENT_CONFIRMED: _run_arguments(
        naming.RUN_AGENT_CONFIRMED, "agent", ConfirmedRunArguments
    ),
    naming.GET_SKILL: GetSkillArguments,
    naming.JOB_STATUS: JobStatusArguments,
}


def schema_of(tool: str) -> dict[str, Any]:
    """The `inputSchema` clients see for `tool` (a copy: the caller may change it)."""
    return copy.deepcopy(_SCHEMAS[tool])


# Generated once: pydantic takes milliseconds per schema, and every refusal carries one.
_SCHEMAS: Final = {tool: model.model_json_schema(by_alias=True) for tool, model in MODELS.items()}


def refusal(tool: str, sent: Mapping[str, Any], error: ValidationError) -> Answer:
    """The `invalid` answer for the call `sent` to `tool` that its model refused: unknown
    argument names with the closest valid ones, else a line per wrong argument saying how
    to fix it."""
    model = MODELS[tool]
    allowed = model.names()
    unknown = [str(p["loc"][0]) for p in error.errors() if p["type"] == "extra_forbidden"]
    if unknown:
        return Answer(
            Status.invalid,
            error=(
                f"{tool} takes {', '.join(allowed)}; "
                f"unknown argument(s) {', '.join(map(repr, unknown))}"
                + (" (tool arguments go inside args)" if issubclass(model, RunArguments) else "")
            ),
            schema=schema_of(tool),
            did_you_mean={k: did_you_mean(k, allowed) for k in unknown},
        )
    lines = [model.fixes[f](sent.get(f)) for f in wrong_arguments(error) if f in model.fixes]
    name = sent.get(model.kind) if issubclass(model, RunArguments) else None
    return Answer(
        Status.invalid,
        tool=name[:_SHOWN] if isinstance(name, str) and name else None,
        error="; ".join(lines) or f"{tool}: {error.error_count()} wrong argument(s)",
        schema=schema_of(tool),
    )


def wrong_arguments(error: ValidationError) -> list[str]:
    """The names of the arguments a refused call got wrong, each once, in the model's order."""
    return list(dict.fromkeys(str(p["loc"][0]) for p in error.errors() if p["loc"]))


Refuse = Callable[[str, Mapping[str, Any], ValidationError], CallToolResult]


class ArgumentsTool(Tool):
    """A tool whose arguments are its `Arguments` model: the SDK derives the schema from it
    and validates each call against it, once; a call it refuses is answered by `refuse`
    (a result the model can read, never a protocol error)."""

    refuse: Refuse = Field(exclude=True)

    @classmethod
    def of(
        cls, fn: Callable[..., Any], *, name: str, annotations: ToolAnnotations, refuse: Refuse
    ) -> ArgumentsTool:
        """The tool `name` (one of `naming.TOOL_NAMES`) calling `fn(arguments=...)`, and its
        `Context` parameter if it has one."""
        # What `Tool.from_function` builds, but from the given model: it would derive one
        # from `fn`'s signature, with pydantic's defaults (unknown arguments ignored).
        return cls(
            fn=fn,
            name=name,
            title=naming.TITLES[name],
            description=naming.DESCRIPTIONS[name],
            parameters=schema_of(name),
            fn_metadata=FuncMetadata(arg_model=MODELS[name]),
            is_async=True,
            context_kwarg=find_context_parameter(fn),
            annotations=annotations,
            refuse=refuse,
        )

    async def run(
        self, arguments: dict[str, Any], context: Context[Any, Any], convert_result: bool = False
    ) -> Any:
        """The SDK's run; arguments the model refuses are answered by `refuse`."""
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(
                exc.__cause__, ValidationError
            ):
                raise
            return self.refuse(self.name, arguments, exc.__cause__)
