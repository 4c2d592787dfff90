"""Compare a declaration with the registry: every difference, named, one line each.

The published surface is built from the declaration alone, so a manifest edit can never
reshape it; this check is what keeps the declaration truthful. A registry action that is not
declared is simply not published.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from webplatform.registry.model import ActionSpec, ArgSpec, Registry
from webplatform.suggest import did_you_mean
from webplatform.surface.load import find_declaration, load_declaration
from webplatform.surface.model import Declaration, Problem, PublishedArg, PublishedTool
from webplatform.surface.names import NameTable, client_prefixes, name_room
from webplatform.trust import gate

_COMPARED = ("type", "required", "default", "enum")


def _hint(word: str, choices: list[str]) -> str:
    near = did_you_mean(word, choices)
    return f" (renamed to {' or '.join(near)}?)" if near else ""


def _arg_value(arg: ArgSpec | PublishedArg, field: str) -> Any:
    value = getattr(arg, field)
    return list(value) if isinstance(value, tuple) else value


def _arg_problems(tool: PublishedTool, action: ActionSpec) -> Iterator[tuple[str, str]]:
    declared = {a.name: a for a in tool.args}
    actual = {a.name: a for a in action.args}
    for name in actual.keys() - declared.keys():
        yield "new-argument", f"the registry has a new argument {name!r}; publish it or not"
    for name in declared.keys() - actual.keys():
        hint = _hint(name, list(actual.keys() - declared.keys()))
        yield "removed-argument", f"argument {name!r} is no longer in the registry{hint}"
    for name in sorted(declared.keys() & actual.keys()):
        for field in _COMPARED:
            was, now = _arg_value(declared[name], field), _arg_value(actual[name], field)
            if was != now:
                yield (
                    "changed-argument",
                    (f"argument {name!r} changed {field}: published {was!r}, registry {now!r}"),
                )


def tool_problems(tool: PublishedTool, registry: Registry) -> list[tuple[str, str]]:
    """(kind, message) for each way one published tool disagrees with the registry."""
    key = tool.key
    spec = registry.runnable(key.kind, key.name)
    if spec is None:
        known = sorted(registry.runnables(key.kind))
        broken = [e for e in registry.errors if e.name == key.name]
        if broken:
            because = f": its manifest does not load ({broken[0].message})"
        else:
            because = _hint(key.name, known)
        return [("missing-tool", f"no {key.kind} {key.name!r} in the registry{because}")]
    action = spec.action(key.action)
    if action is None:
        names = [a.name for a in spec.actions]
        message = f"{key.kind} {key.name!r} has no action {key.action!r}"
        return [("missing-action", message + _hint(key.action, names))]
    why = gate.why_irreversible(spec.name, action)
    if why is not None:
        message = (
            f"irreversible ({why}); the chat surface publishes reversible actions only: "
            "remove it (it stays on the generic surface, behind approval)"
        )
        return [("irreversible", message)]
    problems = list(_arg_problems(tool, action))
    badge = gate.describe(spec.name, action)
    if badge != tool.reversibility:
        message = f"published as {tool.reversibility}, the gate now says {badge}"
        problems.append(("changed-reversibility", message))
    return problems


def check_declaration(declaration: Declaration, registry: Registry) -> list[Problem]:
    """Every difference between `declaration` and `registry`, plus name problems."""
    out: list[Problem] = []

    def add(kind: str, message: str, tool: PublishedTool) -> None:
        out.append(Problem(kind, f"{tool.key}: {message}", declaration.path, tool.line))

    seen: dict[Any, PublishedTool] = {}
    for tool in declaration.tools:
        if tool.key in seen:
            add("duplicate", "declared twice; keep one", tool)
            continue
        seen[tool.key] = tool
        for kind, message in tool_problems(tool, registry):
            add(kind, message, tool)
    table = NameTable(seen.values())
    room, server = name_room(declaration.server.name), declaration.server.name
    longest = max(client_prefixes(server).values(), key=len)
    for tool in seen.values():
        name = table.name(tool.key)
        if len(name) > room:
            message = (
                f"{name!r} is {len(name)} characters; with the prefix {longest!r} it passes "
                "the 64-character limit: declare a shorter short:"
            )
            add("name-too-long", message, tool)
    for clash in table.clashes:
        first = seen[clash.keys[0]]
        others = "; ".join(str(k) for k in clash.keys)
        add("name-collision", f"the published name {clash.name!r} is shared by {others} "
            "(compared ignoring case): give all but one a short:", first)  # fmt: skip
    return out


def load_and_check(path: Path, registry: Registry) -> tuple[Declaration | None, list[Problem]]:
    """The declaration at `path` and every problem in it or difference from `registry`."""
    declaration, problems = load_declaration(path)
    if declaration is None:
        return None, problems
    return declaration, check_declaration(declaration, registry)


def check_lines(roots: list[Path], registry: Registry) -> tuple[list[str], int]:
    """`aat check`'s lines for the chat surface, and how many of them are errors."""
    path = find_declaration(roots)
    if path is None:
        return ["ok     surface none declared (no chat_surface.yaml: the chat surface is off)"], 0
    declaration, problems = load_and_check(path, registry)
    lines = [f"error  surface {p.kind}: {p}" for p in problems]
    if declaration is not None and not problems:
        lines.append(
            f"ok     surface {path}: {len(declaration.tools)} tools published "
            f"(surface_version {declaration.surface_version})"
        )
    return lines, len(problems)
