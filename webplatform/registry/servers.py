"""Upstream MCP servers as registry entries (SPEC §22): `ROOT/servers/NAME/server.yaml`.

A server file is checked as a manifest is (one line per problem, each with its line; a bad
file is listed with its error and loses nothing else), and read again only when it changes.
What a server offers is not in its file: its tools are listed by the server itself and
become actions of tool `NAME` once an admin accepted their definitions (`upstream_actions`,
composed by the platform).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from webplatform.canonical import canonical_json
from webplatform.registry.checks import Collector
from webplatform.registry.limits import tool_limits
from webplatform.registry.manifest import SECRET_NAME_RE, _ManifestCheck
from webplatform.registry.model import (
    ActionSpec,
    ArgSpec,
    ArgType,
    ManifestError,
    Registry,
    ServerSpec,
    ServerToolRule,
    ToolSpec,
)
from webplatform.registry.network import network_reach
from webplatform.registry.verbs import irreversible_verbs_in
from webplatform.registry.yamldoc import YamlProblem, parse_yaml

SERVER_KEYS = (
    "name",
    "description",
    "command",
    "url",
    "auth",
    "env",
    "secrets",
    "reads",
    "writes",
    "network",
    "limits",
    "tools",
)
TOOL_KEYS = ("read_only", "reversible", "preview", "timeout_s")
# `$WORKSPACE` (or `${WORKSPACE}`): the caller's workspace, in `command` and `env` values.
WORKSPACE_VAR = re.compile(r"\$\{WORKSPACE\}|\$WORKSPACE(?![A-Za-z0-9_])")
_URL = re.compile(r"https?://[^\s]+")


def load_server(path: Path) -> tuple[ServerSpec | None, tuple[ManifestError, ...]]:
    """Read and check one `server.yaml`: its spec, or its errors (never raises for a bad one)."""
    folder = path.parent
    bare = Collector("tool", folder.name, path)
    try:
        doc = parse_yaml(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError) as exc:
        bare.fail(f"cannot read {path.name} ({exc}); save it as a readable UTF-8 file")
        return None, tuple(bare.errors)
    except YamlProblem as exc:
        bare.fail(exc.message, line=exc.line)
        return None, tuple(bare.errors)
    if not isinstance(doc.data, dict):
        bare.fail(f"{path.name} must be a YAML mapping with name, description and command", line=1)
        return None, tuple(bare.errors)
    check = _ServerCheck("tool", folder.name, path, doc)
    spec = check.server(doc.data, folder)
    return (spec if not check.errors else None), tuple(check.errors)


class _ServerCheck(_ManifestCheck):
    def server(self, data: dict[Any, Any], folder: Path) -> ServerSpec | None:
        """The whole file; a spec only when nothing at all is wrong."""
        self.unknown_keys(data, SERVER_KEYS, "server.yaml", ())
        name = self.folder_name(data, folder.name, "server.yaml")
        description = self.text(data, "description", "server.yaml", (), required=True)
        command, url = self.command(data), self.url(data)
        spec = ServerSpec(
            name=name or folder.name,
            description=description or "",
            folder=folder,
            path=self.path,
            command=command,
            url=url,
            bearer_secret=self.bearer(data),
            env=self.env(data),
            secrets=self.secrets(data),
            reads=self.paths(_without_workspace(data, "reads"), "reads", folder),
            writes=self.paths(_without_workspace(data, "writes"), "writes", folder),
            network=network_reach(self, data),
            limits=tool_limits(self, data),
            tools=self.tool_rules(data),
        )
        return None if self.errors or not (name and description) else spec

    def command(self, data: dict[Any, Any]) -> tuple[str, ...]:
        """`command:`, a non-empty list of strings (argv, never a shell line)."""
        raw = data.get("command")
        if raw is None:
            if data.get("url") is None:
                self.fail("server.yaml needs `command: [...]` (stdio) or `url: https://...`")
            return ()
        if data.get("url") is not None:
            self.fail("give `command` or `url`, not both", ("url",))
        if isinstance(raw, str):
            raw = raw.split()
        if not isinstance(raw, list) or not raw or not all(isinstance(x, str) for x in raw):
            self.fail(
                "`command` must be a list of strings, e.g. `[npx, -y, PACKAGE]`", ("command",)
            )
            return ()
        return tuple(raw)

    def url(self, data: dict[Any, Any]) -> str | None:
        """`url:`, an http(s) address of a streamable HTTP MCP endpoint."""
        raw = self.text(data, "url", "server.yaml", (), required=False)
        if raw is not None and not _URL.fullmatch(raw):
            self.fail(f"url {raw!r} is not an http(s) address", ("url",))
            return None
        return raw

    def bearer(self, data: dict[Any, Any]) -> str | None:
        """`auth: {bearer_secret: NAME}`: the secret sent as the bearer token."""
        raw = data.get("auth")
        if raw is None:
            return None
        if not isinstance(raw, dict) or set(raw) != {"bearer_secret"}:
            self.fail("`auth` must be `{bearer_secret: NAME}`", ("auth",))
            return None
        name = raw["bearer_secret"]
        if not isinstance(name, str) or not SECRET_NAME_RE.fullmatch(name):
            self.fail("`auth.bearer_secret` must be a secret's name", ("auth", "bearer_secret"))
            return None
        return name

    def mapping(self, data: dict[Any, Any], key: str, refusal: str) -> dict[Any, Any]:
        """The mapping under `key` ({} when absent; `refusal` when it is something else)."""
        raw = data.get(key)
        if raw is not None and not isinstance(raw, dict):
            self.fail(refusal, (key,))
        return raw if isinstance(raw, dict) else {}

    def env(self, data: dict[Any, Any]) -> tuple[tuple[str, str], ...]:
        """`env:`, a mapping of variable names to fixed text values."""
        found: list[tuple[str, str]] = []
        raw = self.mapping(data, "env", "`env` must be a mapping such as `{LOG_LEVEL: info}`")
        for key, value in raw.items():
            if not isinstance(key, str) or not SECRET_NAME_RE.fullmatch(key):
                self.fail(f"env name {key!r} is not an environment variable name", ("env",))
            elif isinstance(value, bool) or not isinstance(value, str | int | float):
                self.fail(f"env {key} must be text; put it in quotes", ("env", key))
            else:
                found.append((key, str(value)))
        return tuple(found)

    def tool_rules(self, data: dict[Any, Any]) -> tuple[ServerToolRule, ...]:
        """`tools:`, per upstream tool what the operator says of it."""
        rules: list[ServerToolRule] = []
        raw = self.mapping(data, "tools", "`tools` must map upstream tool names to settings")
        for name, item in raw.items():
            where = ("tools", str(name))
            item = item or {}
            if not isinstance(item, dict):
                self.fail(f"tools.{name} must be a mapping such as `{{read_only: true}}`", where)
                continue
            self.unknown_keys(item, TOOL_KEYS, f"tools.{name}", where)
            read_only = self.flag(item, "read_only", f"tools.{name}", where)
            reversible = self.flag(item, "reversible", f"tools.{name}", where)
            if read_only and reversible is False:
                self.fail(f"tools.{name} says read_only and reversible: false; pick one", where)
            preview = self.text(item, "preview", f"tools.{name}", where, required=False)
            timeout = self.timeout(item, f"tools.{name}", where)
            rules.append(ServerToolRule(str(name), read_only, reversible, preview, timeout))
        return tuple(rules)


def _without_workspace(data: dict[Any, Any], key: str) -> dict[Any, Any]:
    """`data` with `$WORKSPACE` left out of `key`: the workspaces are a server's, as a tool's
    (SPEC §14), so naming it grants nothing more and is not a path to check."""
    raw = data.get(key)
    if not isinstance(raw, list):
        return data
    return {**data, key: [p for p in raw if not (isinstance(p, str) and WORKSPACE_VAR.search(p))]}


def with_workspace(text: str, workspace: Path | None) -> str:
    """`text` with `$WORKSPACE` replaced by the caller's workspace (`.` when there is none)."""
    return WORKSPACE_VAR.sub(lambda _m: str(workspace or "."), text)


class ServerLoader:
    """Every `ROOT/servers/NAME/server.yaml` of the roots, read again only when one changed."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = tuple(Path(r) for r in roots)
        self._lock = threading.Lock()
        self._stamps: tuple[Any, ...] | None = None
        self._found: tuple[dict[str, ServerSpec], tuple[ManifestError, ...]] = ({}, ())

    def load(self) -> tuple[dict[str, ServerSpec], tuple[ManifestError, ...]]:
        """The servers by name (the first root wins a name) and the errors of the others."""
        files = [p for root in self.roots for p in _server_files(root)]
        stamps = tuple((p, *_stamp(p)) for p in files)
        with self._lock:
            if stamps == self._stamps:
                return self._found
            servers: dict[str, ServerSpec] = {}
            errors: list[ManifestError] = []
            for path in files:
                spec, problems = load_server(path)
                errors.extend(problems)
                if spec is not None and spec.name in servers:
                    where = servers[spec.name].path
                    why = f"server '{spec.name}' is already defined in {where}; rename this one"
                    errors.append(ManifestError("tool", spec.name, path, why))
                elif spec is not None:
                    servers[spec.name] = spec
            self._stamps, self._found = stamps, (servers, tuple(errors))
            return self._found


def _server_files(root: Path) -> list[Path]:
    folder = root / "servers"
    try:
        names = sorted(p.name for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []
    return [folder / n / "server.yaml" for n in names if not n.startswith((".", "_"))]


def _stamp(path: Path) -> tuple[int, int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0, 0)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def definition_digest(definition: dict[str, Any]) -> str:
    """sha256 over the canonical JSON of one upstream tool's definition (its name,
    description, input schema and annotations): what an admin accepts, and what changes
    when any of them does."""
    return hashlib.sha256(canonical_json(definition).encode("utf-8")).hexdigest()


def pinned_definition(tool: dict[str, Any]) -> dict[str, Any]:
    """The part of an upstream `tools/list` entry that is pinned (SPEC §22)."""
    return {
        "name": tool.get("name"),
        "description": tool.get("description"),
        "inputSchema": tool.get("inputSchema"),
        "annotations": tool.get("annotations"),
    }


_JSON_TYPES: dict[str, ArgType] = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
}


def schema_args(schema: Any) -> tuple[ArgSpec, ...]:
    """An upstream tool's `inputSchema` as the registry's arguments (names kept verbatim):
    the typed model's reading of it (`argmodel.args_from_json_schema`), or, for a schema
    outside what that reads, each property at its plain type (`object` when it has none),
    so validation never refuses what the upstream accepts for want of a type: the upstream
    checks the rest, and agents are offered its own schema unchanged."""
    from webplatform.registry.argmodel import UnsupportedSchema, args_from_json_schema

    try:
        return args_from_json_schema(schema)
    except UnsupportedSchema:
        pass
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return ()
    required = set(schema.get("required") or ())
    args: list[ArgSpec] = []
    for name, prop in props.items():
        prop = prop if isinstance(prop, dict) else {}
        raw = prop.get("type")
        arg_type = _JSON_TYPES.get(raw) if isinstance(raw, str) else None
        enum = prop.get("enum")
        args.append(
            ArgSpec(
                name=str(name),
                type=arg_type or "object",
                required=name in required,
                description=str(prop.get("description") or ""),
                default=prop.get("default"),
                enum=tuple(enum) if isinstance(enum, list) and arg_type else None,
            )
        )
    return tuple(args)


def upstream_read_only(server: ServerSpec, definition: dict[str, Any]) -> bool:
    """Whether an upstream tool counts as read-only (SPEC §22): the operator's file says so,
    or the server's own hint says so and its name holds no irreversible verb. The hint is
    from something aat does not trust, so anything else is irreversible."""
    rule = server.rule(str(definition.get("name")))
    if rule.reversible is False:
        return False
    if rule.read_only:
        return True
    hints = definition.get("annotations") or {}
    hinted = isinstance(hints, dict) and hints.get("readOnlyHint") is True
    return hinted and not irreversible_verbs_in(str(definition.get("name")))


def upstream_action(server: ServerSpec, definition: dict[str, Any]) -> ActionSpec:
    """One accepted upstream tool as an action of tool `server.name`: read-only, or
    irreversible (`reversible: false`) as `upstream_read_only` says."""
    name = str(definition.get("name"))
    read_only = upstream_read_only(server, definition)
    return ActionSpec(
        name=name,
        description=str(definition.get("description") or ""),
        read_only=read_only,
        reversible=None if read_only else False,
        args=schema_args(definition.get("inputSchema")),
        input_schema=schema if isinstance(schema := definition.get("inputSchema"), dict) else None,
        preview=server.rule(name).preview,
        timeout_s=server.rule(name).timeout_s,
    )


def server_tool(server: ServerSpec, definitions: Sequence[dict[str, Any]]) -> ToolSpec:
    """Server `server` as tool `server.name`, its accepted `definitions` as its actions."""
    actions = tuple(upstream_action(server, d) for d in definitions)
    return ToolSpec(
        kind="tool",
        name=server.name,
        description=server.description,
        version="",
        runtime="exec",
        entrypoint=server.path.name,
        folder=server.folder,
        manifest_path=server.path,
        secrets=tuple(dict.fromkeys((*server.secrets, *_bearer(server)))),
        actions=actions,
        reads=server.reads,
        writes=server.writes,
        network=server.network,
        limits=server.limits,
        server=server,
    )


def _bearer(server: ServerSpec) -> tuple[str, ...]:
    return (server.bearer_secret,) if server.bearer_secret else ()


def compose(
    base: Registry,
    found: tuple[dict[str, ServerSpec], tuple[ManifestError, ...]],
    accepted: dict[str, dict[str, tuple[str, dict[str, Any]]]],
    held: dict[str, tuple[str, ...]],
) -> Registry:
    """`base` with every server `found` (and its errors): each server with accepted tool
    definitions becomes tool `NAME`, those definitions its actions; the `held` ones stay
    out. A server named as a tool is an error and left out."""
    servers, errors = found
    tools = dict(base.tools)
    kept: dict[str, ServerSpec] = {}
    problems = list(errors)
    for name, server in servers.items():
        if name in base.tools:
            why = f"server '{name}' has the name of a tool in {base.tools[name].manifest_path}"
            problems.append(ManifestError("tool", name, server.path, why + "; rename one"))
            continue
        pins = accepted.get(name, {})
        server = replace(server, accepted=tuple((t, d) for t, (d, _) in sorted(pins.items())))
        kept[name] = server
        # A tool whose definition changed is held: its older accepted one is not offered.
        waiting = set(held.get(name, ()))
        definitions = [d for tool, (_, d) in sorted(pins.items()) if tool not in waiting]
        if definitions:
            tools[name] = _with_previews(server_tool(server, definitions))
    return replace(
        base,
        tools=dict(sorted(tools.items())),
        servers=kept,
        held={k: v for k, v in held.items() if k in kept},
        errors=(*base.errors, *problems),
    )


def _with_previews(tool: ToolSpec) -> ToolSpec:
    """`tool` with each `preview:` kept only when it names one of its read-only actions."""
    ok = {a.name for a in tool.actions if a.read_only}
    actions = tuple(
        a if a.preview is None or a.preview in ok else replace(a, preview=None)
        for a in tool.actions
    )
    return replace(tool, actions=actions)
