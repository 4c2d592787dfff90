"""`capabilities`: discovery narrowest first, so an agent never gets a schema too big to read.

`{}` lists everything compactly, `{search}` finds actions, `{name, action}` gives one action's
arguments and the literal call, `{name}` the full schema unless it is larger than
`AAT_CAPABILITIES_MAX_BYTES`, in which case it degrades to the action-name index. The degrade
keys off size, not a list of tools, so it covers every tool that grows.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Any

from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.resolution import action_schema
from webplatform.registry import secret_status
from webplatform.registry.model import ActionSpec, Registry, SkillSpec, ToolSpec
from webplatform.suggest import did_you_mean, word_set
from webplatform.trust import gate

SEARCH_LIMIT = 50
_PLACEHOLDER = {
    "string": "<string>",
    "integer": 0,
    "number": 0,
    "boolean": True,
    "array": [],
    "object": {},
}


def discover(
    registry: Registry,
    *,
    kind: str | None = None,
    name: str | None = None,
    action: str | None = None,
    search: str | None = None,
    max_bytes: int,
) -> dict[str, Any]:
    """Answer a `capabilities` call (its arguments of the right types: `CapabilitiesArguments`);
    a call that names nothing gets an `invalid` answer saying how to fix it."""
    if action and not name:
        return _invalid("action needs name: call capabilities with name and action")
    if search:
        return _search(registry, kind=kind, name=name or None, query=search)
    if name:
        found = _lookup(registry, kind=kind, name=name)
        if isinstance(found, dict):
            return found
        if isinstance(found, SkillSpec):
            return _skill_entry(found)
        if action:
            return _action_detail(found, action)
        return _full_or_index(found, max_bytes=max_bytes)
    return _overview(registry, kind=kind)


def _invalid(error: str, **extra: Any) -> dict[str, Any]:
    return Answer(Status.invalid, error=error, **extra).to_dict()


def _ready(spec: ToolSpec) -> dict[str, Any]:
    missing = [s for s, present in secret_status(spec).items() if not present]
    out: dict[str, Any] = {"ready": not missing}
    if missing:
        out["missing_secrets"] = missing
    return out


# (registry, kind) -> the overview answer, for the last registry listed. The loader hands back
# the same Registry object while nothing changed on disk; only the readiness of tools that
# declare secrets is worked out again on each call (a secret can be set at any time).
_READINESS = ("ready", "missing_secrets")
_overview_cache: dict[tuple[int, str | None], tuple[Registry, dict[str, Any]]] = {}


def _overview(registry: Registry, *, kind: str | None) -> dict[str, Any]:
    cached = _overview_cache.get((id(registry), kind))
    if cached is None or cached[0] is not registry:
        if any(r is not registry for r, _ in _overview_cache.values()):
            _overview_cache.clear()
        cached = (registry, _build_overview(registry, kind=kind))
        _overview_cache[(id(registry), kind)] = cached
    out = dict(cached[1])
    for plural, entries in (("tools", registry.tools), ("agents", registry.agents)):
        if plural in out and any(s.secrets for s in entries.values()):
            out[plural] = [
                {
                    **{k: v for k, v in entry.items() if k not in _READINESS},
                    **_ready(entries[entry["name"]]),
                }
                if entries[entry["name"]].secrets
                else entry
                for entry in out[plural]
            ]
    return out


def _build_overview(registry: Registry, *, kind: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for plural, entries in (("tools", registry.tools), ("agents", registry.agents)):
        if kind in (None, plural[:-1]):
            out[plural] = [
                {
                    "name": spec.name,
                    "description": spec.description,
                    "actions": len(spec.actions),
                    **_ready(spec),
                }
                for spec in sorted(entries.values(), key=lambda s: s.name)
            ]
    if kind in (None, "skill"):
        out["skills"] = [
            {"name": s.name, "description": s.description}
            for s in sorted(registry.skills.values(), key=lambda s: s.name)
        ]
    if registry.errors:
        out["errors"] = [
            {"kind": e.kind, "name": e.name, "error": str(e)}
            for e in registry.errors
            if kind in (None, e.kind)
        ]
    out["next"] = (
        "call capabilities with name=<name> for a schema, name and action for one action's "
        "arguments and call shape, or search=<words> to find an action"
    )
    return out


def _lookup(
    registry: Registry, *, kind: str | None, name: str
) -> ToolSpec | SkillSpec | dict[str, Any]:
    tables: list[tuple[str, dict[str, Any]]] = [
        ("tool", registry.tools),
        ("agent", registry.agents),
        ("skill", registry.skills),
    ]
    for k, table in tables:
        if kind in (None, k) and name in table:
            found: ToolSpec | SkillSpec = table[name]
            return found
    known = [n for k, table in tables if kind in (None, k) for n in table]
    near = did_you_mean(name, known)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    what = kind or "tool, agent or skill"
    return _invalid(
        f"no {what} named {name!r}{hint} Call capabilities with no arguments to list them all.",
        did_you_mean=near,
    )


def _skill_entry(skill: SkillSpec) -> dict[str, Any]:
    return {
        "kind": "skill",
        "name": skill.name,
        "description": skill.description,
        "next": f"call get_skill with name={skill.name!r} to read it",
    }


def _reversibility(spec: ToolSpec, action: ActionSpec) -> str:
    return gate.describe(spec.name, action)


def call_shape(spec: ToolSpec, action: ActionSpec) -> dict[str, Any]:
    """The literal MCP call to copy for an action, required arguments filled with placeholders."""
    irreversible = gate.is_irreversible(spec.name, action)
    tool = f"run_{spec.kind}_confirmed" if irreversible else f"run_{spec.kind}"
    args = {
        a.name: a.default if a.default is not None else _PLACEHOLDER[a.type]
        for a in action.args
        if a.required
    }
    return {"tool": tool, "arguments": {spec.kind: spec.name, "action": action.name, "args": args}}


def _action_detail(spec: ToolSpec, action_name: str) -> dict[str, Any]:
    action = spec.action(action_name)
    if action is None:
        names = [a.name for a in spec.actions]
        near = did_you_mean(action_name, names)
        hint = f" did you mean {', '.join(near)}?" if near else ""
        return _invalid(
            f"{spec.kind} {spec.name!r} has no action {action_name!r};{hint} "
            f"call capabilities with name={spec.name!r} for its actions",
            tool=spec.name,
            action=action_name,
            did_you_mean=near,
        )
    out: dict[str, Any] = {
        "kind": spec.kind,
        "name": spec.name,
        "action": action.name,
        "description": action.description,
        "reversibility": _reversibility(spec, action),
        "args": action_schema(action),
        "call": call_shape(spec, action),
    }
    if action.output_schema:
        out["output_schema"] = action.output_schema
    return out


def _full(spec: ToolSpec) -> dict[str, Any]:
    actions = []
    for action in spec.actions:
        entry: dict[str, Any] = {
            "name": action.name,
            "description": action.description,
            "reversibility": _reversibility(spec, action),
            "args": action_schema(action),
        }
        if action.output_schema:
            entry["output_schema"] = action.output_schema
        actions.append(entry)
    return {
        "kind": spec.kind,
        "name": spec.name,
        "description": spec.description,
        "version": spec.version,
        **_ready(spec),
        "network": str(spec.network),
        "actions": actions,
    }


def _full_or_index(spec: ToolSpec, *, max_bytes: int) -> dict[str, Any]:
    full = _full(spec)
    size = len(json.dumps(full, ensure_ascii=False).encode("utf-8"))
    if size <= max_bytes:
        return full
    return {
        "kind": spec.kind,
        "name": spec.name,
        "description": spec.description,
        **_ready(spec),
        "network": str(spec.network),
        "degraded": True,
        "actions": [a.name for a in spec.actions],
        "note": (
            f"the full schema is {size} bytes, over the {max_bytes}-byte limit "
            "(AAT_CAPABILITIES_MAX_BYTES), so only action names are listed: call capabilities "
            f"with name={spec.name!r} and action=<one of these>, or with search=<words>"
        ),
    }


def _matches(query_words: frozenset[str], text: str) -> bool:
    hay, words = text.lower(), word_set(text)
    return all(q in words or q in hay for q in query_words)


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


def _search(
    registry: Registry, *, kind: str | None, name: str | None, query: str
) -> dict[str, Any]:
    words = word_set(query)
    if not words:
        return _invalid("search needs at least one word")
    scope: list[ToolSpec] = []
    for k, table in (("tool", registry.tools), ("agent", registry.agents)):
        if kind in (None, k):
            scope.extend(s for s in table.values() if name in (None, s.name))
    if name and not scope and name not in registry.skills:
        found = _lookup(registry, kind=kind, name=name)
        if isinstance(found, dict):
            return found
    in_scope = {id(s) for s in scope}
    index = _action_index(registry)
    matched: set[int] | None = None
    for word in words:
        matched = index.matching(word) if matched is None else matched & index.matching(word)
        if not matched:
            break
    hits: list[dict[str, Any]] = []
    for number in sorted(matched or ()):
        spec, action = index.entries[number]
        if id(spec) in in_scope:
            hits.append(
                {
                    "kind": spec.kind,
                    "name": spec.name,
                    "action": action.name,
                    "description": action.description,
                }
            )
    if kind in (None, "skill"):
        for skill in sorted(registry.skills.values(), key=lambda s: s.name):
            if name in (None, skill.name) and _matches(words, f"{skill.name} {skill.description}"):
                hits.append({"kind": "skill", "name": skill.name, "description": skill.description})
    out: dict[str, Any] = {"search": query, "matches": hits[:SEARCH_LIMIT], "total": len(hits)}
    if len(hits) > SEARCH_LIMIT:
        out["note"] = f"showing the first {SEARCH_LIMIT} of {len(hits)}: add words to narrow"
    out["next"] = "call capabilities with name and action for the arguments of one match"
    return out
