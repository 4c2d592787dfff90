"""`capabilities`: discovery narrowest first, so an agent never gets a schema too big to read.

`{}` lists everything compactly, `{search}` finds actions, `{name, action}` gives one action's
arguments and the literal call, `{name}` the full schema unless it is larger than
`AAT_CAPABILITIES_MAX_BYTES`, in which case it degrades to the action-name index. The degrade
keys off size, not a list of tools, so it covers every tool that grows.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from webplatform.jobs.answers import Refusal, Status
from webplatform.jobs.resolution import action_schema
from webplatform.registry import search as registry_search
from webplatform.registry import secret_status
from webplatform.registry.model import (
    ActionSpec,
    Registry,
    SkillSpec,
    ToolSpec,
    placeholder,
    run_tool_name,
)
from webplatform.suggest import did_you_mean
from webplatform.trust import gate

SEARCH_LIMIT = 50


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
    try:
        return _discover(
            registry, kind=kind, name=name, action=action, search=search, max_bytes=max_bytes
        )
    except Refusal as refusal:
        return refusal.answer.to_dict()


def _discover(
    registry: Registry,
    *,
    kind: str | None,
    name: str | None,
    action: str | None,
    search: str | None,
    max_bytes: int,
) -> dict[str, Any]:
    """`discover`'s answer; `Refusal` for a call that names nothing."""
    if action and not name:
        raise _invalid("action needs name: call capabilities with name and action")
    if search:
        return _search(registry, kind=kind, name=name or None, query=search)
    if name:
        found = _lookup(registry, kind=kind, name=name)
        if isinstance(found, SkillSpec):
            return _skill_entry(found)
        if action:
            return _action_detail(found, action)
        return _full_or_index(found, max_bytes=max_bytes)
    return _overview(registry, kind=kind)


def _invalid(error: str, **extra: Any) -> Refusal:
    """The refusal of a wrong `capabilities` call, its error saying how to fix it."""
    return Refusal(Status.invalid, error=error, **extra)


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


def _lookup(registry: Registry, *, kind: str | None, name: str) -> ToolSpec | SkillSpec:
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
    raise _invalid(
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
    tool = run_tool_name(spec.kind, confirmed=irreversible)
    args = {
        a.name: a.default if a.default is not None else placeholder(a.type)
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
        raise _invalid(
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
    if action.input_schema is not None:
        out["input_schema"] = action.model.json_schema()  # the upstream server's own (SPEC §22)
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
        **_network(spec),
        "actions": actions,
    }


def _network(spec: ToolSpec) -> dict[str, Any]:
    """What the tool may reach (SPEC §17), and what that leaves open (`UDP not restricted`);
    what one call may use (SPEC §20)."""
    reach = spec.network
    noted = {"network_note": reach.note} if reach.note else {}
    return {"network": str(reach)} | noted | {"limits": dataclasses.asdict(spec.limits)}


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
        **_network(spec),
        "degraded": True,
        "actions": [a.name for a in spec.actions],
        "note": (
            f"the full schema is {size} bytes, over the {max_bytes}-byte limit "
            "(AAT_CAPABILITIES_MAX_BYTES), so only action names are listed: call capabilities "
            f"with name={spec.name!r} and action=<one of these>, or with search=<words>"
        ),
    }


def _search(
    registry: Registry, *, kind: str | None, name: str | None, query: str
) -> dict[str, Any]:
    words = registry_search.query_words(query)
    if not words:
        raise _invalid("search needs at least one word")
    scope: list[ToolSpec] = []
    for k, table in (("tool", registry.tools), ("agent", registry.agents)):
        if kind in (None, k):
            scope.extend(s for s in table.values() if name in (None, s.name))
    if name and not scope and name not in registry.skills:
        _lookup(registry, kind=kind, name=name)  # a refusal: no such tool, agent or skill
    in_scope = {id(s) for s in scope}
    hits: list[dict[str, Any]] = [
        {"kind": spec.kind, "name": spec.name, "action": a.name, "description": a.description}
        for spec, a in registry_search.matching_actions(registry, words)
        if id(spec) in in_scope
    ]
    if kind in (None, "skill"):
        hits.extend(
            {"kind": "skill", "name": skill.name, "description": skill.description}
            for skill in registry_search.matching_skills(registry, words)
            if name in (None, skill.name)
        )
    out: dict[str, Any] = {"search": query, "matches": hits[:SEARCH_LIMIT], "total": len(hits)}
    if len(hits) > SEARCH_LIMIT:
        out["note"] = f"showing the first {SEARCH_LIMIT} of {len(hits)}: add words to narrow"
    out["next"] = "call capabilities with name and action for the arguments of one match"
    return out
