"""The seven tools' argument models: the schema clients see (a contract, SPEC section 5), what
the SDK accepts, and the `invalid` answers for what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_helpers import body, connect
from pydantic import ValidationError

from webplatform.mcp import naming
from webplatform.mcp.arguments import MODELS, refusal, schema_of, wrong_arguments
from webplatform.platform import Platform

TEXT = {"type": "string"}
ARGS = {
    "type": "object",
    "description": (
        "argument name -> value, names verbatim as capabilities shows them "
        '(e.g. {"max-results": 10})'
    ),
    "additionalProperties": True,
}
REASON = {
    "type": "string",
    "maxLength": 500,
    "description": (
        "why you want this call, in a sentence or two (at most 500 characters); the operator "
        "who decides reads it on the approval card"
    ),
}


def _run(kind: str, *, confirmed: bool = False) -> dict[str, Any]:
    properties: dict[str, Any] = {
        kind: {**TEXT, "description": f"the {kind}'s name, as listed by capabilities"},
        "action": {
            **TEXT,
            "description": f"the action to run; may be left out when the {kind} has one action",
        },
        "args": ARGS,
    }
    if confirmed:
        properties["reason"] = REASON
    return {"type": "object", "properties": properties, "required": [kind]}


# What clients saw when the schemas were written by hand: the models must keep it.
ADVERTISED: dict[str, dict[str, Any]] = {
    naming.CAPABILITIES: {
        "type": "object",
        "properties": {
            "kind": {
                **TEXT,
                "enum": ["tool", "agent", "skill"],
                "description": "limit to one kind",
            },
            "name": {**TEXT, "description": "a tool, agent or skill name: its full schema"},
            "action": {**TEXT, "description": "with name: one action's args and call shape"},
            "search": {**TEXT, "description": "words to find in action names and descriptions"},
        },
        "required": [],
    },
    naming.RUN_TOOL: _run("tool"),
    naming.RUN_AGENT: _run("agent"),
    naming.RUN_TOOL_CONFIRMED: _run("tool", confirmed=True),
    naming.RUN_AGENT_CONFIRMED: _run("agent", confirmed=True),
    naming.GET_SKILL: {
        "type": "object",
        "properties": {"name": {**TEXT, "description": "the skill's name"}},
        "required": ["name"],
    },
    naming.JOB_STATUS: {
        "type": "object",
        "properties": {
            "job": {
                "type": "integer",
                "description": "the job id from a run result; leave out to list your recent jobs",
            },
            "wait_s": {
                "type": "number",
                "minimum": 0,
                "description": "wait up to this many seconds for the job to change (capped)",
            },
        },
        "required": [],
    },
}


@pytest.mark.parametrize("tool", naming.TOOL_NAMES)
def test_each_model_advertises_the_contracted_schema(tool: str) -> None:
    schema = schema_of(tool)
    assert schema == ADVERTISED[tool]
    assert list(schema["properties"]) == list(ADVERTISED[tool]["properties"]), "same order"


@pytest.mark.anyio
async def test_the_listed_schemas_are_the_models(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        listed = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    assert listed == ADVERTISED


def _refused(tool: str, sent: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ValidationError) as refused:
        MODELS[tool].model_validate(sent)
    return refusal(tool, sent, refused.value).to_dict()


@pytest.mark.parametrize(
    ("tool", "sent", "error"),
    [
        ("run_tool", {}, "run_tool needs tool: the tool's name (a string)"),
        ("run_agent", {"agent": 7}, "run_agent needs agent: the agent's name (a string)"),
        ("run_tool_confirmed", {"tool": ""}, "run_tool_confirmed needs tool"),
        (
            "run_tool",
            {"tool": "../x"},
            "'../x' is not a tool name (lower-case letters, digits and -); "
            "call capabilities to list every tool",
        ),
        ("run_tool", {"tool": "a", "action": 3}, "action must be a string"),
        ("run_tool_confirmed", {"tool": "a", "reason": 5}, "reason must be text"),
        ("run_tool_confirmed", {"tool": "a", "reason": "x" * 501}, "over the 500-character"),
        ("capabilities", {"kind": "tools"}, "kind must be one of tool, agent, skill, got 'tools'"),
        ("capabilities", {"search": ["a"]}, "search must be a string"),
        ("get_skill", {}, "get_skill needs name"),
        ("job_status", {"job": "seven"}, "job must be the integer job id from a run result"),
        ("job_status", {"job": True}, "job must be the integer job id"),
        ("job_status", {"job": 1.5}, "job must be the integer job id"),
        ("job_status", {"wait_s": -1}, "wait_s must be a number of seconds, 0 or more"),
        ("job_status", {"wait_s": "3"}, "wait_s must be a number of seconds, 0 or more"),
    ],
)
def test_a_wrong_argument_is_named_with_its_fix(
    tool: str, sent: dict[str, Any], error: str
) -> None:
    answer = _refused(tool, sent)
    assert answer["status"] == "invalid"
    assert error in answer["error"]
    assert answer["schema"] == ADVERTISED[tool]


def test_unknown_arguments_get_the_valid_names_and_the_closest() -> None:
    answer = _refused("run_tool", {"tool": "a", "arg": {}, "name": "x"})
    assert answer["error"] == (
        "run_tool takes tool, action, args; unknown argument(s) 'arg', 'name' "
        "(tool arguments go inside args)"
    )
    assert answer["did_you_mean"] == {"arg": ["args"], "name": []}
    assert _refused("job_status", {"jobs": 1})["did_you_mean"] == {"jobs": ["job"]}


def test_arguments_clients_add_are_dropped_and_others_kept() -> None:
    # Gemini CLI adds `wait_for_previous` to every tool's schema and may send it.
    run = MODELS["run_tool"].model_validate({"tool": "a", "wait_for_previous": True})
    assert run.model_dump() == {"name": "a", "action": None, "args": None}
    status = MODELS["job_status"].model_validate({"job": " 12 ", "wait_for_previous": False})
    assert status.model_dump() == {"job": 12, "wait_s": None}


def test_null_is_taken_as_left_out() -> None:
    sent = {"tool": "a", "action": None, "args": None, "reason": None}
    assert MODELS["run_tool_confirmed"].model_validate(sent).model_dump()["reason"] is None
    assert MODELS["capabilities"].model_validate({"kind": None}).model_dump()["kind"] is None


@pytest.mark.anyio
async def test_args_of_the_wrong_shape_get_the_actions_argument_schema(
    platform: Platform, era: str
) -> None:
    async with connect(platform, era) as client:
        listed = body(await client.call_tool("run_tool", {"tool": "hello-world", "args": [1]}))
        unknown = body(await client.call_tool("run_tool", {"tool": "nope", "args": "x"}))
        skill = body(await client.call_tool("get_skill", {"name": 5}))
    assert listed["error"] == "args must be a JSON object of argument name to value, got list"
    assert listed["action"] == "greet"
    assert [a["name"] for a in listed["schema"]] == ["name"]
    assert unknown["error"].startswith("unknown tool 'nope'"), "a name that names nothing first"
    assert "kind=skill" in skill["error"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=3,
)
KEYS = st.sampled_from(
    ["tool", "agent", "action", "args", "reason", "kind", "name", "search", "job", "wait_s"]
) | st.text(min_size=1, max_size=6)


@settings(max_examples=60)
@given(data=st.data())
def test_any_call_is_taken_or_answered_in_one_line(data: st.DataObject) -> None:
    tool = data.draw(st.sampled_from(naming.TOOL_NAMES))
    own = st.sampled_from(MODELS[tool].names())
    sent: dict[str, Any] = data.draw(st.dictionaries(own | KEYS, JSON, max_size=4))
    try:
        MODELS[tool].model_validate(sent)
    except ValidationError as refused:
        answer = refusal(tool, sent, refused)
        assert answer.status.value == "invalid"
        assert answer.error and "\n" not in answer.error
        assert answer.schema == ADVERTISED[tool]
        wrong = wrong_arguments(refused)
        unknown = [w for w in wrong if w not in MODELS[tool].names()]
        assert all(repr(w) in answer.error for w in unknown)
        assert unknown or all(w in answer.error for w in wrong), "each wrong argument named"
