"""Hostile manifests and arguments: the loader and the validator answer, they never raise.

Random YAML-ish documents go into a real tool.yaml on disk; whatever is in it, loading gives
either a valid tool or line-level errors, and the rest of the registry still loads. Random
arguments against real action schemas always get an answer: clean arguments or a one-line
problem, never an exception.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from webplatform.config import EXAMPLES_ROOT
from webplatform.registry import RegistryLoader
from webplatform.registry.manifest import load_manifest
from webplatform.registry.model import ARG_TYPES, ActionSpec, ArgSpec
from webplatform.registry.validation import parse_text_args, validate_args

VALID = """\
name: fuzzed
description: A tool whose manifest is being fuzzed.
version: 0.1.0
runtime: python
entrypoint: main.py
secrets: []
actions:
  - name: list-things
    description: List things.
    read_only: true
    timeout_s: 10
    args:
      - {name: path, type: string, required: true, description: A path}
      - {name: max-results, type: integer}
      - {name: mode, type: string, enum: [fast, full], default: fast}
      - {name: api-key, type: string, secret: true}
    output_schema: '{ "things": [] }'
"""
KEYS = [
    *("name", "description", "version", "runtime", "entrypoint", "secrets", "actions", "args"),
    *("type", "required", "enum", "default", "read_only", "reversible", "timeout_s", "secret"),
    *("output_schema", "<<", "&a", "*a", "!!python/object", "-", ":", "{", "["),
]
JUNK = ["\t", "\n  ", "\x00", "\ufeff"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(
        [
            "python",
            "bash",
            "exec",
            "node",
            "../../etc/passwd",
            "/bin/sh",
            "main.py",
            "string",
            "array",
            "object",
            "send-message",
            "",
            "~",
            "null",
        ]
    ),  # fmt: skip
)
DOCS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner, max_size=6),
    ),
    max_leaves=30,
)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """The valid manifest with random cuts, insertions and swapped lines."""
    text = VALID
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        how = draw(st.sampled_from(["cut", "insert", "swap"]))
        if how == "cut":
            text = text[:at] + text[at + draw(st.integers(1, 40)) :]
        elif how == "insert":
            text = text[:at] + draw(st.sampled_from(KEYS + JUNK)) + text[at:]
        else:
            lines = text.splitlines()
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    return text


MANIFEST_TEXT = st.one_of(
    st.text(max_size=300),
    DOCS.map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
    DOCS.map(lambda d: yaml.safe_dump({**yaml.safe_load(VALID), "actions": [d]})),
    mutated(),
)


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="aat-fuzz-manifest."))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


_counter = itertools.count()


def _write(root: Path, text: str | bytes) -> Path:
    folder = root / "tools" / f"t{next(_counter)}"
    folder.mkdir(parents=True)
    (folder / "main.py").write_text("print('{}')\n")
    path = folder / "tool.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def _assert_answered(path: Path) -> None:
    result = load_manifest(path, "tool")
    assert (result.spec is None) == bool(result.errors), "a tool, or errors: never both, never none"
    for error in result.errors:
        # Names the file; a problem from the YAML parser itself is one line too.
        assert str(error).startswith(str(path)) and error.message.strip(), error
        if error.message.startswith("YAML"):
            assert "\n" not in error.message, error.message


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=MANIFEST_TEXT)
def test_any_manifest_text_gives_a_tool_or_errors(scratch: Path, text: str) -> None:
    try:
        path = _write(scratch, text)
    except UnicodeEncodeError:
        path = _write(scratch, text.encode("utf-8", errors="replace"))
    _assert_answered(path)


@hsettings(max_examples=100, deadline=None)
@given(raw=st.binary(max_size=200))
def test_any_bytes_give_errors_not_exceptions(scratch: Path, raw: bytes) -> None:
    _assert_answered(_write(scratch, raw))


def test_alias_bombs_are_refused_fast(tmp_path: Path) -> None:
    laughs = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    laughs += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    loop = "&x [*x]"
    bombs = [VALID + "\n".join(laughs), "name: &n [a, *n]\n", loop, "[" * 5000 + "]" * 5000]
    for text in bombs:
        started = time.monotonic()
        result = load_manifest(_write(tmp_path, text), "tool")
        assert result.spec is None and result.errors, text[:40]
        assert time.monotonic() - started < 5, f"took too long on {text[:40]!r}"


def test_a_hostile_manifest_does_not_take_the_registry_down(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    shutil.copytree(EXAMPLES_ROOT, root)
    laughs = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    laughs += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    (root / "tools" / "bomb").mkdir()
    (root / "tools" / "bomb" / "tool.yaml").write_text("\n".join(laughs))
    (root / "tools" / "garbage").mkdir()
    (root / "tools" / "garbage" / "tool.yaml").write_bytes(b"\xff\xfe\x00 not yaml {{{")
    registry = RegistryLoader([root]).load()
    assert {"hello-world", "outbox", "xlsx"} <= set(registry.tools)
    assert {e.name for e in registry.errors} >= {"bomb", "garbage"}


# --- tool arguments -------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
ARG_SPECS = st.builds(
    ArgSpec,
    name=st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True),
    type=st.sampled_from(ARG_TYPES),
    required=st.booleans(),
    default=st.none() | JSON_VALUES,
    enum=st.none() | st.lists(JSON_VALUES, min_size=1, max_size=4).map(tuple),
    secret=st.booleans(),
)
ACTIONS = st.builds(
    ActionSpec,
    name=st.just("act"),
    args=st.lists(ARG_SPECS, max_size=6, unique_by=lambda a: a.name).map(tuple),
)


@hsettings(max_examples=150, deadline=None)
@given(action=ACTIONS, args=JSON_VALUES)
def test_validation_answers_any_json_arguments(action: ActionSpec, args: Any) -> None:
    clean, problems = validate_args(action, args)
    assert isinstance(clean, dict)
    if problems:
        assert problems.line and "\n" not in problems.line
    else:
        assert isinstance(args, dict | None)
        json.dumps(clean)  # what passes is JSON again, ready to store


@hsettings(max_examples=100, deadline=None)
@given(
    action=ACTIONS,
    raw=st.dictionaries(st.text(max_size=12), st.text(max_size=40), max_size=6),
)
def test_text_arguments_from_forms_and_the_cli_always_get_an_answer(
    action: ActionSpec, raw: dict[str, str]
) -> None:
    typed, problems = parse_text_args(action, raw)
    assert isinstance(typed, dict)
    assert not problems or problems.line
