"""The reversibility gate: names and flags decide, argument values never do."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from webplatform.registry import ActionSpec
from webplatform.trust.gate import (
    IRREVERSIBLE_VERBS,
    describe,
    is_irreversible,
    name_words,
    why_irreversible,
)

VERBS = sorted(IRREVERSIBLE_VERBS)
SEPARATORS = st.sampled_from(["-", "_", "."])
# Lowercase words that are not verbs themselves; they may still contain a verb inside
# (`sender`, `postgres`), which is exactly what must not count.
SAFE_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=10).filter(
    lambda w: w not in IRREVERSIBLE_VERBS
)
FLAGS = st.tuples(st.booleans(), st.sampled_from([None, True, False]))


def action(name: str, *, read_only: bool = False, reversible: bool | None = None) -> ActionSpec:
    return ActionSpec(name=name, read_only=read_only, reversible=reversible)


@st.composite
def names_with(draw: st.DrawFn, words: st.SearchStrategy[str], verb: bool) -> str:
    """A name of safe words joined by separators, with one verb at a random place if `verb`."""
    parts = draw(st.lists(words, min_size=0 if verb else 1, max_size=4))
    if verb:
        parts.insert(draw(st.integers(0, len(parts))), draw(st.sampled_from(VERBS)))
    sep = draw(SEPARATORS)
    return sep.join(parts)


@pytest.mark.parametrize(
    ("tool", "action_name", "expected"),
    [
        ("outbox", "send-message", "irreversible"),
        ("outbox", "delete-messages", "irreversible"),
        ("outbox", "list-messages", "reversible"),
        ("postgres-query", "run", "reversible"),
        ("mail", "sender-stats", "reversible"),
        ("mail-send", "list", "irreversible"),
        ("git", "push", "irreversible"),
        ("api", "sendMessage", "irreversible"),
        ("api", "SEND_ALL", "irreversible"),
        ("api", "v2.post", "irreversible"),
        ("api", "repost", "reversible"),
        ("docs", "archive", "reversible"),
        ("shop", "cancel-order", "irreversible"),
    ],
)
def test_examples(tool: str, action_name: str, expected: str) -> None:
    assert describe(tool, action(action_name)) == expected


def test_describe_distinguishes_read_only_from_reversible() -> None:
    assert describe("xlsx", action("list-sheets", read_only=True)) == "read-only"
    assert describe("xlsx", action("create-sheet")) == "reversible"
    assert describe("xlsx", action("create-sheet", reversible=False)) == "irreversible"


def test_why_names_the_reason() -> None:
    assert why_irreversible("outbox", action("send-message")) == (
        "the action name 'send-message' contains 'send'"
    )
    assert why_irreversible("mail-send", action("list")) == "the name 'mail-send' contains 'send'"
    assert why_irreversible("x", action("y", reversible=False)) == (
        "its manifest says reversible: false"
    )
    assert why_irreversible("x", action("y")) is None


def test_name_words_split_on_separators_and_case() -> None:
    assert name_words("send-Message_v2.final") == ["send", "message", "v", "2", "final"]
    assert name_words("HTTPPostRequest") == ["http", "post", "request"]
    assert name_words("") == []


@given(
    tool=names_with(SAFE_WORDS, verb=True), other=names_with(SAFE_WORDS, verb=False), flags=FLAGS
)
def test_a_verb_anywhere_in_either_name_is_irreversible_whatever_the_flags(
    tool: str, other: str, flags: tuple[bool, bool | None]
) -> None:
    read_only, reversible = flags
    assert is_irreversible(tool, action(other, read_only=read_only, reversible=reversible))
    assert is_irreversible(other, action(tool, read_only=read_only, reversible=reversible))
    assert describe(other, action(tool, read_only=read_only)) == "irreversible"


@given(tool=st.text(), name=st.text(), read_only=st.booleans())
def test_reversible_false_is_always_irreversible(tool: str, name: str, read_only: bool) -> None:
    assert is_irreversible(tool, action(name, read_only=read_only, reversible=False))


@given(
    tool=names_with(SAFE_WORDS, verb=False),
    name=names_with(SAFE_WORDS, verb=False),
    reversible=st.sampled_from([None, True]),
)
def test_names_without_a_whole_verb_are_reversible(
    tool: str, name: str, reversible: bool | None
) -> None:
    assert not is_irreversible(tool, action(name, reversible=reversible))


@given(
    verb=st.sampled_from(VERBS),
    prefix=st.text(alphabet="abcdefghijklmnopqrstuvwxyz", max_size=4),
    suffix=st.text(alphabet="abcdefghijklmnopqrstuvwxyz", max_size=4),
)
def test_a_verb_inside_a_longer_word_does_not_count(verb: str, prefix: str, suffix: str) -> None:
    word = prefix + verb + suffix
    # `re` + `set` is the verb `reset`; a bare verb is the property above.
    assume(bool(prefix or suffix) and word not in IRREVERSIBLE_VERBS)
    assume(f"{word}s" not in IRREVERSIBLE_VERBS)
    assert not is_irreversible(word, action(f"list-{word}s"))


def test_the_gate_cannot_see_argument_values() -> None:
    # Classification takes names and the manifest's flags only; there is no parameter through
    # which a subject line saying "please send" could reach it.
    for function in (is_irreversible, describe, why_irreversible):
        assert list(inspect.signature(function).parameters) == ["tool_name", "action"]
    assert not is_irreversible("outbox", action("compose", reversible=None))
