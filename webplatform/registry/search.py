"""Registry search: one rule for every surface, so an agent (`capabilities {search}`) and an
operator (the dashboard's registry page) get the same hits for the same query.

A query is its singularised words (`word_set`); a text matches when every query word is one
of the text's words or appears anywhere in it. Actions are found through an index built once
per registry version.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from webplatform.registry.model import ActionSpec, Registry, SkillSpec, ToolSpec
from webplatform.suggest import word_set


def query_words(query: str) -> frozenset[str]:
    """The words a query searches for; empty when it has none (only spaces or dashes)."""
    return word_set(query)


def text_matches(words: frozenset[str], text: str) -> bool:
    """Whether every query word is one of `text`'s words or appears anywhere in it."""
    hay, own = text.lower(), word_set(text)
    return all(q in own or q in hay for q in words)


def matching_actions(
    registry: Registry, words: frozenset[str]
) -> list[tuple[ToolSpec, ActionSpec]]:
    """Every action (of a tool or agent) whose `tool action description` matches all `words`,
    in listing order: by tool name, tools before agents, actions in manifest order."""
    index = _action_index(registry)
    matched: set[int] | None = None
    for word in words:
        matched = index.matching(word) if matched is None else matched & index.matching(word)
        if not matched:
            break
    return [index.entries[number] for number in sorted(matched or ())]


def matching_skills(registry: Registry, words: frozenset[str]) -> list[SkillSpec]:
    """Every skill whose name and description match all `words`, by name."""
    return [
        skill
        for skill in sorted(registry.skills.values(), key=lambda s: s.name)
        if text_matches(words, f"{skill.name} {skill.description}")
    ]


@dataclass(frozen=True)
class _SearchIndex:
    """Every action of one registry version, ready for word queries.

    `entries` in listing order (by tool name; tools before agents); `text` all their
    lower-cased texts joined by newlines, entry `i` starting at `starts[i]`; `by_word` the
    entries whose (singularised) words include a word. An action matches a query word when
    the word is one of its words or appears anywhere in its text; each query word's matches
    are found with the index and a substring search of `text` (at C speed), not a loop in
    Python over every action.
    """

    registry: Registry
    entries: list[tuple[ToolSpec, ActionSpec]]
    text: str
    starts: list[int]
    by_word: dict[str, list[int]]

    def matching(self, word: str) -> set[int]:
        """The entries `word` matches: one of their words, or anywhere in their text."""
        found = set(self.by_word.get(word, ()))
        at = self.text.find(word)
        while at != -1:
            entry = bisect.bisect_right(self.starts, at) - 1
            found.add(entry)
            if entry + 1 == len(self.starts):
                break
            # The next occurrence in a later entry: this one is counted already.
            at = self.text.find(word, self.starts[entry + 1])
        return found


# The index of the last registry searched. The loader hands back the very same Registry
# object while nothing changed on disk, so it is built once per registry version.
_search_index: _SearchIndex | None = None


def _action_index(registry: Registry) -> _SearchIndex:
    global _search_index
    cached = _search_index
    if cached is not None and cached.registry is registry:
        return cached
    entries: list[tuple[ToolSpec, ActionSpec]] = []
    for table in (registry.tools, registry.agents):
        for spec in table.values():
            entries.extend((spec, action) for action in spec.actions)
    entries.sort(key=lambda entry: entry[0].name)  # stable: tools before agents, action order
    texts: list[str] = []
    starts: list[int] = []
    by_word: dict[str, list[int]] = {}
    at = 0
    for number, (spec, action) in enumerate(entries):
        text = f"{spec.name} {action.name} {action.description}"
        texts.append(text.lower().replace("\n", " "))
        starts.append(at)
        at += len(texts[-1]) + 1
        for word in word_set(text):
            by_word.setdefault(word, []).append(number)
    index = _SearchIndex(registry, entries, "\n".join(texts), starts, by_word)
    _search_index = index
    return index
