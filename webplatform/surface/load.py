"""Read `chat_surface.yaml` into a Declaration, naming the line of every mistake in the file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast, get_args

from webplatform.registry.model import ARG_TYPES, ArgType, RunnableKind
from webplatform.registry.yamldoc import YamlDoc, YamlProblem, parse_yaml
from webplatform.surface.model import (
    DECLARATION_FILE,
    Declaration,
    Key,
    Problem,
    PublishedArg,
    PublishedReversibility,
    PublishedTool,
    ServerIdentity,
)
from webplatform.surface.names import NAMESPACE_RE, SHORT_RE

_TOP = {"surface_version", "server", "namespaces"}
_SERVER = {"name", "title", "description", "registry_name", "website_url", "instructions"}
_ENTRY = {"tool", "agent", "action", "reversibility", "description", "title", "short", "args"}
_ARG = {"type", "required", "default", "enum", "description"}
_REVERSIBILITY: tuple[str, ...] = get_args(PublishedReversibility)

Where = tuple[str | int, ...]


def find_declaration(roots: Sequence[Path]) -> Path | None:
    """The `chat_surface.yaml` beside the registry: in the first root that holds one."""
    return next((r / DECLARATION_FILE for r in roots if (r / DECLARATION_FILE).is_file()), None)


class _Reader:
    def __init__(self, path: Path, doc: YamlDoc) -> None:
        self.path, self.doc = path, doc
        self.problems: list[Problem] = []

    def fail(self, message: str, where: Where, kind: str = "invalid") -> None:
        self.problems.append(Problem(kind, message, self.path, self.doc.line(*where)))

    def mapping(self, value: Any, allowed: set[str], label: str, where: Where) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(f"{label} must be a mapping", where)
            return {}
        for key in value:
            if key not in allowed:
                known = ", ".join(sorted(allowed))
                self.fail(f"{label}: unknown key {key!r}; allowed: {known}", (*where, key))
        return value

    def text(self, m: dict[str, Any], key: str, where: Where, *, required: bool) -> str | None:
        value = m.get(key)
        if value is None:
            if required:
                self.fail(f"{key} is required", where)
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail(f"{key} must be a non-empty string", (*where, key))
            return None
        return value

    def server(self, raw: Any) -> ServerIdentity:
        if raw is None:
            return ServerIdentity()
        m = self.mapping(raw, _SERVER, "server", ("server",))
        given = {k: self.text(m, k, ("server",), required=False) for k in _SERVER if k in m}
        return ServerIdentity(**{k: v for k, v in given.items() if v is not None})

    def arg(self, name: Any, raw: Any, where: Where) -> PublishedArg | None:
        m = self.mapping(raw, _ARG, f"argument {name!r}", where)
        kind = m.get("type")
        if kind not in ARG_TYPES:
            self.fail(f"argument {name!r}: type must be one of {', '.join(ARG_TYPES)}", where)
            return None
        required = m.get("required", False)
        enum = m.get("enum")
        if not isinstance(required, bool) or (enum is not None and not isinstance(enum, list)):
            self.fail(f"argument {name!r}: required is true/false and enum a list", where)
            return None
        return PublishedArg(
            name=str(name),
            type=cast(ArgType, kind),
            required=required,
            default=m.get("default"),
            enum=tuple(enum) if enum is not None else None,
            description=str(m.get("description") or ""),
        )

    def entry(self, namespace: str, raw: Any, where: Where) -> PublishedTool | None:
        m = self.mapping(raw, _ENTRY, "a published tool", where)
        kinds = [k for k in ("tool", "agent") if k in m]
        if len(kinds) != 1:
            self.fail("a published tool names exactly one of tool: or agent:", where)
            return None
        kind: RunnableKind = "tool" if kinds[0] == "tool" else "agent"
        name = self.text(m, kind, where, required=True)
        action = self.text(m, "action", where, required=True)
        description = self.text(m, "description", where, required=True)
        reversibility = m.get("reversibility")
        if reversibility not in _REVERSIBILITY:
            allowed = ", ".join(_REVERSIBILITY)
            self.fail(
                f"reversibility must be one of {allowed} (irreversible actions are never "
                "published on the chat surface)",
                (*where, "reversibility"),
            )
            return None
        short = self.text(m, "short", where, required=False)
        if short is not None and not SHORT_RE.match(short):
            self.fail(f"short {short!r} may use only letters, digits, _ and -", (*where, "short"))
            return None
        raw_args = m.get("args")
        if not isinstance(raw_args, dict):
            self.fail("args must be a mapping of argument name to schema ({} for none)", where)
            return None
        args = [self.arg(n, a, (*where, "args", n)) for n, a in raw_args.items()]
        if name is None or action is None or description is None or None in args:
            return None
        return PublishedTool(
            namespace=namespace,
            key=Key(kind, name, action),
            description=description,
            reversibility=cast(PublishedReversibility, reversibility),
            args=tuple(a for a in args if a is not None),
            title=self.text(m, "title", where, required=False),
            short=short,
            line=self.doc.line(*where),
        )

    def declaration(self) -> Declaration | None:
        top = self.mapping(self.doc.data, _TOP, DECLARATION_FILE, ())
        version = top.get("surface_version")
        if not isinstance(version, str) or not version.strip():
            self.fail('surface_version is required, as a quoted string ("1.0.0")', ())
        namespaces = top.get("namespaces")
        if not isinstance(namespaces, dict):
            self.fail("namespaces must map each namespace to a list of published tools", ())
            namespaces = {}
        tools: list[PublishedTool] = []
        for namespace, entries in namespaces.items():
            where: Where = ("namespaces", namespace)
            if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
                self.fail(f"namespace {namespace!r}: lower-case letters, digits and -", where)
                continue
            if not isinstance(entries, list):
                self.fail(f"namespace {namespace!r} must hold a list of published tools", where)
                continue
            for i, raw in enumerate(entries):
                tool = self.entry(namespace, raw, (*where, i))
                if tool is not None:
                    tools.append(tool)
        server = self.server(top.get("server"))
        if self.problems or not isinstance(version, str):
            return None
        return Declaration(self.path, version, server, tuple(tools))


def load_declaration(path: Path) -> tuple[Declaration | None, list[Problem]]:
    """The declaration in `path` and the problems found in it (None when it cannot be used)."""
    try:
        doc = parse_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return None, [Problem("invalid", f"cannot read it: {exc.strerror}", path)]
    except YamlProblem as exc:
        return None, [Problem("invalid", exc.message, path, exc.line)]
    reader = _Reader(path, doc)
    declaration = reader.declaration()
    return declaration, reader.problems
