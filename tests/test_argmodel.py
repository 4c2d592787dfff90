"""One typed model per action: validation, defaults, JSON Schema and widgets from one place,
built from a manifest's arguments or from an upstream tool's JSON Schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webplatform.registry.argmodel import (
    ActionModel,
    UnsupportedSchema,
    args_from_json_schema,
    model_from_json_schema,
    widget,
)
from webplatform.registry.model import ActionSpec, ArgSpec

ARGS = (
    ArgSpec("path", "string", required=True, description="Where"),
    ArgSpec("max-results", "integer", default=50),
    ArgSpec("mode", "string", enum=("fast", "full"), default="fast"),
    ArgSpec("ratio", "number"),
    ArgSpec("dry-run", "boolean"),
    ArgSpec("columns", "array"),
    ArgSpec("filter", "object"),
    ArgSpec("model_config", "integer", enum=(1, 2)),
)
ACTION = ActionSpec(name="read-sheet", args=ARGS)

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}
_SAID = {"string": "a string", "integer": "an integer", "number": "a number"}
_SAID |= {"boolean": "true or false", "array": "a JSON array", "object": "a JSON object"}


def _expected(args: dict[str, Any]) -> list[str]:
    """The rules as the manifest states them, spelled out by hand: what the model must say."""
    names = [a.name for a in ARGS]
    lines = [f"unknown argument {n!r}" for n in args if n not in names]
    for arg in ARGS:
        value = args.get(arg.name)
        if value is None:
            if arg.required:
                lines.append(f"missing required argument {arg.name!r} ({arg.type})")
        elif isinstance(value, bool) != (arg.type == "boolean") or not isinstance(
            value, _TYPES[arg.type]
        ):
            shown = json.dumps(value, ensure_ascii=False)[:60]
            lines.append(f"argument {arg.name!r} must be {_SAID[arg.type]}, got {shown}")
        elif arg.enum is not None and value not in arg.enum:
            choices = ", ".join(json.dumps(e) for e in arg.enum)
            lines.append(f"argument {arg.name!r} must be one of {choices}")
    return lines


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=4,
)
_NAMES = st.sampled_from([a.name for a in ARGS] + ["max_results", "zzz"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_NAMES, _JSON | st.sampled_from(["fast", "full", 1, 2]), max_size=6))
def test_the_model_judges_every_call_as_the_manifest_says(args: dict[str, Any]) -> None:
    clean, errors = ActionSpec(name="read-sheet", args=ARGS).model.validate(args)
    got = [
        line.split(" (did you mean")[0].split("; valid arguments")[0] for line in errors.problems
    ]
    assert got == _expected(args)
    assert clean == {
        **{"max-results": 50, "mode": "fast"},
        **{k: v for k, v in args.items() if v is not None},
    }


def test_the_json_schema_offered_comes_from_the_model() -> None:
    assert ACTION.model.json_schema() == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Where"},
            "max-results": {"type": "integer", "default": 50},
            "mode": {"type": "string", "default": "fast", "enum": ["fast", "full"]},
            "ratio": {"type": "number"},
            "dry-run": {"type": "boolean"},
            "columns": {"type": "array"},
            "filter": {"type": "object"},
            "model_config": {"type": "integer", "enum": [1, 2]},
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_the_run_form_widgets_come_from_the_model() -> None:
    shown = {a.name: widget(a) for a in ARGS} | {
        "key": widget(ArgSpec("key", "string", secret=True))
    }
    assert shown == {
        "path": "text",
        "max-results": "integer",
        "mode": "select",
        "ratio": "number",
        "dry-run": "checkbox",
        "columns": "json",
        "filter": "json",
        "model_config": "select",
        "key": "password",
    }


UPSTREAM = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to write"},
        "content": {"type": "string"},
        "mode": {"enum": ["append", "replace"], "default": "replace"},
        "lines": {"type": ["integer", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "dry": {"type": "boolean", "default": False},
        "meta": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}


def test_an_upstream_json_schema_becomes_the_same_model_and_is_offered_unchanged() -> None:
    model = model_from_json_schema(UPSTREAM)
    assert [(a.name, a.type, a.required) for a in model.args] == [
        ("path", "string", True),
        ("content", "string", True),
        ("mode", "string", False),
        ("lines", "integer", False),
        ("tags", "array", False),
        ("dry", "boolean", False),
        ("meta", "object", False),
    ]
    assert model.json_schema() == UPSTREAM
    clean, errors = model.validate({"path": "a", "content": "b", "lines": "3", "mode": "x"})
    assert errors.problems == [
        'argument \'mode\' must be one of "append", "replace"',
        "argument 'lines' must be an integer, got \"3\"",
    ]
    clean, errors = model.validate({"path": "a", "content": "b"})
    assert not errors
    assert clean == {"path": "a", "content": "b", "mode": "replace", "dry": False}
    spec = ActionSpec(name="write_file", args=model.args, input_schema=UPSTREAM)
    assert spec.model.json_schema() == UPSTREAM


@pytest.mark.parametrize(
    ("schema", "line"),
    [
        ([], "an input schema must be a JSON object schema of type object"),
        ({"type": "string"}, "an input schema must be a JSON object schema of type object"),
        (
            {
                "type": "object",
                "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
            },
            'property \'x\' has type [{"type": "string"}, {"type": "integer"}]; supported: one '
            "of string, integer, number, boolean, array, object",
        ),
        ({"type": "object", "properties": {"x": {"type": "null"}}}, "property 'x' has type"),
        ({"type": "object", "properties": {"x": 3}}, "property 'x' must be a JSON Schema object"),
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/Gone"}}},
            "property 'x' refers to '#/$defs/Gone', which is not here",
        ),
    ],
)
def test_a_schema_outside_the_subset_is_one_line_naming_the_property(
    schema: Any, line: str
) -> None:
    with pytest.raises(UnsupportedSchema) as exc:
        args_from_json_schema(schema)
    assert str(exc.value).startswith(line)
    assert "\n" not in str(exc.value)


def test_what_generators_write_for_optional_values_counts_as_its_type() -> None:
    """Python servers (pydantic) write `anyOf` with `null` and `$ref`s; others `const`."""
    schema = {
        "type": "object",
        "properties": {
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "order": {"$ref": "#/$defs/Order", "description": "Sort order"},
            "kind": {"const": "file"},
            "level": {"enum": [1, 2.5, None]},
        },
        "$defs": {"Order": {"enum": ["asc", "desc"], "type": "string", "title": "Order"}},
    }
    args = {a.name: a for a in args_from_json_schema(schema)}
    assert args["limit"] == ArgSpec("limit", "integer")
    assert args["order"] == ArgSpec(
        "order", "string", description="Sort order", enum=("asc", "desc")
    )
    assert args["kind"] == ArgSpec("kind", "string", enum=("file",))
    assert args["level"] == ArgSpec("level", "number", enum=(1, 2.5))
    _, errors = model_from_json_schema(schema).validate({"limit": None, "order": "up"})
    assert errors.problems == ['argument \'order\' must be one of "asc", "desc"']


def test_an_empty_schema_is_an_action_without_arguments() -> None:
    model = ActionModel(args_from_json_schema({"type": "object"}))
    assert model.validate({})[1].problems == []
    assert model.validate({"x": 1})[1].problems == ["unknown argument 'x'; valid arguments: none"]
