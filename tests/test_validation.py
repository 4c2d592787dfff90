"""Argument validation shared by every surface."""

from __future__ import annotations

from webplatform.registry.model import ActionSpec, ArgSpec
from webplatform.registry.validation import (
    SECRET_MASK,
    mask_secrets,
    parse_text_args,
    validate_args,
)

ACTION = ActionSpec(
    name="read-sheet",
    args=(
        ArgSpec("path", "string", required=True),
        ArgSpec("max-results", "integer"),
        ArgSpec("mode", "string", enum=("fast", "full")),
        ArgSpec("ratio", "number"),
        ArgSpec("dry-run", "boolean"),
        ArgSpec("columns", "array"),
        ArgSpec("filter", "object"),
        ArgSpec("api-key", "string", secret=True),
    ),
)


def test_valid_call_passes_verbatim_names() -> None:
    args, errors = validate_args(ACTION, {"path": "/a.xlsx", "max-results": 3, "dry-run": True})
    assert not errors
    assert args == {"path": "/a.xlsx", "max-results": 3, "dry-run": True}


def test_unknown_argument_names_the_valid_ones_and_suggests() -> None:
    _, errors = validate_args(ACTION, {"path": "x", "max_result": 3})
    assert "unknown argument 'max_result'" in errors.line
    assert "max-results" in errors.line
    assert errors.did_you_mean["max_result"][0] == "max-results"


def test_missing_required_and_wrong_types_each_reported() -> None:
    _, errors = validate_args(ACTION, {"max-results": "3", "dry-run": "yes", "ratio": True})
    line = errors.line
    assert "missing required argument 'path' (string)" in line
    assert "'max-results' must be an integer" in line
    assert "'dry-run' must be true or false" in line
    assert "'ratio' must be a number" in line


def test_enum_checked() -> None:
    _, errors = validate_args(ACTION, {"path": "x", "mode": "slow"})
    assert errors.line == 'argument \'mode\' must be one of "fast", "full"'


def test_args_must_be_an_object() -> None:
    _, errors = validate_args(ACTION, ["path", "x"])
    assert "args must be a JSON object" in errors.line


def test_text_args_are_typed_before_validation() -> None:
    args, errors = parse_text_args(
        ACTION,
        {
            "path": "--weird-but-valid",
            "max-results": "5",
            "ratio": "0.5",
            "dry-run": "true",
            "columns": '["a", "ž"]',
            "filter": '{"x": 1}',
            "mode": "",
        },
    )
    assert not errors, errors.line
    assert args == {
        "path": "--weird-but-valid",
        "max-results": 5,
        "ratio": 0.5,
        "dry-run": True,
        "columns": ["a", "ž"],
        "filter": {"x": 1},
    }


def test_text_args_bad_json_and_numbers_are_one_line_each() -> None:
    _, errors = parse_text_args(ACTION, {"path": "p", "max-results": "many", "filter": "{"})
    assert "'max-results' must be an integer, got 'many'" in errors.line
    assert "'filter' must be a JSON object in JSON" in errors.line


def test_secrets_masked() -> None:
    masked = mask_secrets(ACTION, {"path": "p", "api-key": "hunter2"})
    assert masked == {"path": "p", "api-key": SECRET_MASK}
