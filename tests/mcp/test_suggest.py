"""`did_you_mean`: singularised word sets first (order and plurals do not matter), then spelling."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from webplatform.suggest import did_you_mean

LETTERS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=9)
# Words ending in s, x, y and sh are where naive singularising goes wrong (bus/buses).
WORD = st.one_of(
    LETTERS,
    LETTERS.map(lambda w: w + "us"),
    st.sampled_from(
        ["bus", "status", "box", "entry", "class", "house", "wish", "sheet", "credential", "key"]
    ),
)
WORDS = st.lists(WORD, min_size=1, max_size=4, unique=True)


def plural(word: str) -> str:
    """The regular English plural."""
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def test_examples_from_the_spec() -> None:
    assert did_you_mean("credential-list", ["list-credentials", "get-credential"])[0] == (
        "list-credentials"
    )
    assert did_you_mean("sheets-list", ["list-sheets", "read-sheet", "dump"])[0] == "list-sheets"
    assert did_you_mean("entry-add", ["add-entries", "remove-entry"])[0] == "add-entries"
    assert did_you_mean("hello-wrld", ["hello-world", "outbox", "xlsx"]) == ["hello-world"]
    assert did_you_mean("zzzz", ["hello-world", "outbox"]) == []
    assert did_you_mean("buses-list", ["list-bus", "bus-lister"])[0] == "list-bus"
    assert did_you_mean("statuses-get", ["get-status", "get-stats"])[0] == "get-status"


@given(words=WORDS, data=st.data())
def test_word_order_and_plurals_do_not_matter(words: list[str], data: st.DataObject) -> None:
    target = "-".join(words)
    shuffled = data.draw(st.permutations(words))
    pluralise = data.draw(st.lists(st.booleans(), min_size=len(words), max_size=len(words)))
    query = "-".join(plural(w) if p else w for w, p in zip(shuffled, pluralise, strict=True))
    others = data.draw(st.lists(WORDS.map("-".join), max_size=8))
    others = [o for o in others if sorted(o.split("-")) != sorted(words)]
    assume(query != target)
    assert did_you_mean(query, [*others, target])[:1] == [target]


@given(query=WORDS.map("-".join), candidates=st.lists(WORDS.map("-".join), max_size=10))
def test_suggestions_are_distinct_known_names_never_the_query(
    query: str, candidates: list[str]
) -> None:
    found = did_you_mean(query, candidates, limit=3)
    assert len(found) <= 3
    assert len(set(found)) == len(found)
    assert set(found) <= set(candidates)
    assert query not in found
    assert found == did_you_mean(query, list(reversed(candidates)), limit=3)


def test_a_huge_name_gets_no_suggestion_and_costs_nothing() -> None:
    assert did_you_mean("list-sheets" * 100_000, ["list-sheets", "read-sheet"]) == []
