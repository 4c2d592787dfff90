"""Plain data for templates: registry search hits, action details, the literal call shapes,
and the run form's fields. No HTML here; templates decide how it looks.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from webplatform.registry import ActionSpec, ArgSpec, Registry, ToolSpec, argmodel, secret_status
from webplatform.registry import search as registry_search
from webplatform.registry.model import RunnableKind, placeholder, run_tool_name
from webplatform.trust import gate


@dataclass(frozen=True)
class SearchHit:
    """One registry search result: a tool, agent, skill, or one action of a tool or agent.

    No URL here: the template builds it (under the root path) from kind, name and action."""

    kind: str
    name: str
    description: str
    action: str | None = None
    badge: str | None = None
    # A tool's or agent's network reach (SPEC §17), on its own hit (not on its actions').
    network: str | None = None


@dataclass(frozen=True)
class ActionView:
    """An action as the registry page shows it."""

    spec: ActionSpec
    badge: str
    why: str | None
    mcp_call: str
    cli_line: str


@dataclass(frozen=True)
class ToolView:
    """A tool or agent with its actions and whether each declared secret is present."""

    spec: ToolSpec
    actions: list[ActionView]
    secrets: dict[str, bool] = field(default_factory=dict)


def _example(arg: ArgSpec) -> Any:
    if arg.default is not None:
        return arg.default
    if arg.enum:
        return arg.enum[0]
    return placeholder(arg.type)


def mcp_call(kind: RunnableKind, tool: ToolSpec, action: ActionSpec) -> str:
    """The literal MCP `tools/call` params for this action, required arguments filled in."""
    irreversible = gate.is_irreversible(tool.name, action)
    mcp_tool = run_tool_name(kind, confirmed=irreversible)
    args = {a.name: _example(a) for a in action.args if a.required}
    call = {"name": mcp_tool, "arguments": {kind: tool.name, "action": action.name, "args": args}}
    return json.dumps(call, indent=2, ensure_ascii=False)


def cli_line(kind: RunnableKind, tool: ToolSpec, action: ActionSpec) -> str:
    """The `aat run` command line for this action, required arguments as placeholders."""
    parts = ["aat", "run", tool.name, action.name]
    if kind == "agent":
        parts.insert(2, "--agent")
    for arg in action.args:
        if not arg.required:
            continue
        value = _example(arg)
        if arg.type == "string" and value == placeholder("string"):
            value = arg.name.upper()
        parts += [f"--{arg.name}", value if isinstance(value, str) else json.dumps(value)]
    return " ".join(shlex.quote(p) for p in parts)


def tool_view(kind: RunnableKind, tool: ToolSpec) -> ToolView:
    """Everything the registry page shows about one tool or agent."""
    actions = [
        ActionView(
            spec=a,
            badge=gate.describe(tool.name, a),
            why=gate.why_irreversible(tool.name, a),
            mcp_call=mcp_call(kind, tool, a),
            cli_line=cli_line(kind, tool, a),
        )
        for a in tool.actions
    ]
    return ToolView(spec=tool, actions=actions, secrets=secret_status(tool))


def search(registry: Registry, query: str) -> list[SearchHit]:
    """Tools and agents (each followed by its matching actions) and skills that match the query,
    by the same rule and index as MCP `capabilities {search}`; every one for an empty query."""
    words = registry_search.query_words(query)
    found = registry_search.matching_actions(registry, words)
    actions = {(spec.kind, spec.name, action.name) for spec, action in found}
    hits: list[SearchHit] = []
    for kind in ("tool", "agent"):
        specs = registry.runnables(kind)
        for name in sorted(specs):
            spec = specs[name]
            if registry_search.text_matches(words, f"{spec.name} {spec.description}"):
                hits.append(_tool_hit(spec))
            hits.extend(
                _action_hit(spec, a) for a in spec.actions if (kind, name, a.name) in actions
            )
    skills = registry_search.matching_skills(registry, words)
    hits.extend(SearchHit(kind="skill", name=s.name, description=s.description) for s in skills)
    return hits


def _tool_hit(spec: ToolSpec) -> SearchHit:
    return SearchHit(
        kind=spec.kind,
        name=spec.name,
        description=spec.description,
        network=spec.network.shown(),
    )


def _action_hit(spec: ToolSpec, action: ActionSpec) -> SearchHit:
    return SearchHit(
        kind=spec.kind,
        name=spec.name,
        action=action.name,
        description=action.description,
        badge=gate.describe(spec.name, action),
    )


@dataclass(frozen=True)
class FormField:
    """One run-form input generated from an argument."""

    arg: ArgSpec
    widget: argmodel.Widget  # text | select | checkbox | integer | number | json | password
    value: str


def form_fields(action: ActionSpec, raw: dict[str, str] | None = None) -> list[FormField]:
    """The run form for an action; `raw` refills what the operator typed after an error."""
    fields: list[FormField] = []
    for arg in action.args:
        if raw is not None:
            value = raw.get(arg.name, "")
        elif arg.default is None:
            value = ""
        elif isinstance(arg.default, str):
            value = arg.default
        else:
            value = json.dumps(arg.default, ensure_ascii=False)
        fields.append(FormField(arg=arg, widget=argmodel.widget(arg), value=value))
    return fields


def raw_form_values(
    action: ActionSpec, form: dict[str, str], *, prefix: str = "arg:"
) -> dict[str, str]:
    """The submitted text of each argument (inputs named `<prefix><name>`); empty fields are
    left out (so a required one is reported missing), and an unticked checkbox means false."""
    raw: dict[str, str] = {}
    for arg in action.args:
        key = f"{prefix}{arg.name}"
        if argmodel.widget(arg) == "checkbox":
            raw[arg.name] = "true" if form.get(key) in ("true", "on") else "false"
        elif form.get(key, "") != "":
            raw[arg.name] = form[key]
    return raw


def text_values(args: dict[str, Any]) -> dict[str, str]:
    """A call's arguments as the text a form shows for them (JSON for all but strings), so
    a form can be prefilled with the current values."""
    return {
        name: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        for name, value in args.items()
    }
