"""The registry's nouns: tools, agents, their actions and arguments, skills, load errors."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

if TYPE_CHECKING:
    from webplatform.registry.argmodel import ActionModel

Kind = Literal["tool", "agent", "skill"]
RunnableKind = Literal["tool", "agent"]
ArgType = Literal["string", "integer", "number", "boolean", "array", "object"]
Runtime = Literal["python", "bash", "node", "exec"]

ARG_TYPES: tuple[ArgType, ...] = get_args(ArgType)
RUNTIMES: tuple[Runtime, ...] = get_args(Runtime)


@dataclass(frozen=True)
class ArgTypeRule:
    """What one argument type means everywhere: the values of it, its name in error messages,
    and the placeholder a literal call shows for a required argument with no default."""

    python: tuple[type, ...]
    described: str
    placeholder: Any


# The only place argument types are spelled out: manifests' defaults and enums, calls' values,
# text parsing and every literal call shape (MCP `capabilities`, the dashboard) use these.
ARG_TYPE_RULES: Final[dict[ArgType, ArgTypeRule]] = {
    "string": ArgTypeRule((str,), "a string", "<string>"),
    "integer": ArgTypeRule((int,), "an integer", 0),
    "number": ArgTypeRule((int, float), "a number", 0),
    "boolean": ArgTypeRule((bool,), "true or false", True),
    "array": ArgTypeRule((list,), "a JSON array", []),
    "object": ArgTypeRule((dict,), "a JSON object", {}),
}


def matches_type(value: Any, arg_type: ArgType) -> bool:
    """Whether a YAML/JSON value is of an argument type (`true` is not an integer)."""
    if isinstance(value, bool) and arg_type != "boolean":
        return False
    return isinstance(value, ARG_TYPE_RULES[arg_type].python)


def placeholder(arg_type: ArgType) -> Any:
    """A fresh placeholder value for a literal call (`<string>`, `0`, `true`, `[]`, `{}`)."""
    return deepcopy(ARG_TYPE_RULES[arg_type].placeholder)


def run_tool_name(kind: RunnableKind, *, confirmed: bool) -> str:
    """The MCP tool that runs a tool or agent: `run_tool`, or `run_tool_confirmed` for calls
    that wait for an operator (these names are a contract with MCP clients, SPEC §5)."""
    return f"run_{kind}_confirmed" if confirmed else f"run_{kind}"


@dataclass(frozen=True)
class ArgSpec:
    """One argument of an action; `name` is kept verbatim (`workspace-id` stays hyphenated)."""

    name: str
    type: ArgType
    required: bool = False
    description: str = ""
    default: Any = None
    enum: tuple[Any, ...] | None = None
    secret: bool = False


@dataclass(frozen=True)
class ActionSpec:
    """One action of a tool, with the manifest's own reversibility flags (the gate decides)."""

    name: str
    description: str = ""
    read_only: bool = False
    # None: the manifest did not say. Only `False` has an effect (stricter); see gate.py.
    reversible: bool | None = None
    timeout_s: float | None = None
    args: tuple[ArgSpec, ...] = ()
    output_schema: str | None = None
    # How many distinct operators must approve (None: 1, or AAT_APPROVALS_REQUIRED).
    approvals: int | None = None
    # False: the operator who asked may not approve (None: AAT_SELF_APPROVAL decides).
    self_approval: bool | None = None
    # The read-only action of the same tool that shows what this one would do (SPEC §16).
    preview: str | None = None
    # An upstream MCP tool's own `inputSchema` (SPEC §22), offered to agents as it is; None
    # for a manifest's action, whose schema comes from `args`.
    input_schema: Any = None

    def arg(self, name: str) -> ArgSpec | None:
        """The argument called exactly `name`, or None."""
        return next((a for a in self.args if a.name == name), None)

    @cached_property
    def model(self) -> ActionModel:
        """The action's typed model (validation, defaults, JSON Schema, form widgets), built
        on first use and kept with this snapshot: a registry of 10,000 actions loads without
        building one."""
        from webplatform.registry.argmodel import ActionModel  # pydantic: only when needed

        return ActionModel(self.args, self.input_schema)


@dataclass(frozen=True)
class NetworkReach:
    """What a tool may reach on the network (SPEC §17): nothing (the default), TCP connections
    to and listening on the listed ports, or `any`thing."""

    any: bool = False
    connect: tuple[int, ...] = ()
    bind: tuple[int, ...] = ()

    @property
    def none(self) -> bool:
        """True for `network: none`: no network but the tool's own loopback."""
        return not (self.any or self.connect or self.bind)

    def __str__(self) -> str:
        """How pages and answers show it: `none`, `any`, `connect 443, 5432; bind 8080`."""
        if self.any:
            return "any"
        parts = [
            f"{verb} {', '.join(map(str, ports))}"
            for verb, ports in (("connect", self.connect), ("bind", self.bind))
            if ports
        ]
        return "; ".join(parts) or "none"

    @property
    def note(self) -> str | None:
        """What declared ports leave open besides them, or None. Such a tool shares the host's
        network and Landlock has rules for TCP only, so its UDP (DNS among it) goes anywhere;
        `none` keeps it in a network of its own, and `any` says so already."""
        return "UDP not restricted" if (self.connect or self.bind) and not self.any else None

    def shown(self) -> str:
        """How pages show it: `str(self)` and the `note`, if any."""
        return f"{self} ({self.note})" if self.note else str(self)


@dataclass(frozen=True)
class ToolLimits:
    """What one call of a tool may use (SPEC §20), from the manifest's `limits:`: processes
    and threads at once, memory (MB), the size of one file it writes and of its scratch
    folder altogether (MB), and open files. Each within its `AAT_MAX_*` ceiling."""

    processes: int = 64
    memory_mb: int = 512
    file_mb: int = 256
    open_files: int = 256

    def __str__(self) -> str:
        """How pages and answers show it: `64 processes, 512 MB memory, ...`."""
        return (
            f"{self.processes} processes, {self.memory_mb} MB memory, "
            f"{self.file_mb} MB per file and scratch, {self.open_files} open files"
        )


@dataclass(frozen=True)
class ToolSpec:
    """A loaded, valid tool or agent manifest."""

    kind: RunnableKind
    name: str
    description: str
    version: str
    runtime: Runtime
    entrypoint: str
    folder: Path
    manifest_path: Path
    secrets: tuple[str, ...] = ()
    actions: tuple[ActionSpec, ...] = ()
    # Paths as written in the manifest (`$AAT_HOME`, `~` expanded when the tool runs).
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    # `warm: true` (python only): calls fork from a warm interpreter (SPEC §12, warm.py).
    warm: bool = False
    # `network:` (SPEC §17); none by default.
    network: NetworkReach = field(default_factory=NetworkReach)
    # `limits:` (SPEC §20); the defaults unless the manifest lowers or raises them.
    limits: ToolLimits = field(default_factory=ToolLimits)
    # The upstream MCP server whose tools these actions are (SPEC §22); None for a manifest.
    server: ServerSpec | None = None

    def action(self, name: str) -> ActionSpec | None:
        """The action called exactly `name`, or None."""
        return next((a for a in self.actions if a.name == name), None)

    @property
    def entrypoint_path(self) -> Path:
        """Absolute path of the script (validated to stay inside `folder`)."""
        return self.folder / self.entrypoint


@dataclass(frozen=True)
class SkillSpec:
    """A skill: markdown with YAML front matter (name, description)."""

    name: str
    description: str
    path: Path
    body: str


@dataclass(frozen=True)
class ManifestError:
    """A manifest or skill that did not load. `message` says what is wrong and how to fix it."""

    kind: Kind
    name: str
    path: Path
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Registry:
    """A snapshot of every registry root: what loaded and what did not."""

    tools: dict[str, ToolSpec] = field(default_factory=dict)
    agents: dict[str, ToolSpec] = field(default_factory=dict)
    skills: dict[str, SkillSpec] = field(default_factory=dict)
    errors: tuple[ManifestError, ...] = ()
    # Upstream MCP servers (SPEC §22), by name; their accepted tools are also in `tools`.
    servers: dict[str, ServerSpec] = field(default_factory=dict)
    # Per server, its upstream tools whose definition is new or changed and not accepted.
    held: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def runnable(self, kind: RunnableKind, name: str) -> ToolSpec | None:
        """The tool or agent called `name`, or None."""
        return (self.tools if kind == "tool" else self.agents).get(name)

    def runnables(self, kind: RunnableKind) -> dict[str, ToolSpec]:
        """All tools or all agents, by name."""
        return self.tools if kind == "tool" else self.agents


@dataclass(frozen=True)
class ServerToolRule:
    """What an operator's `server.yaml` says of one upstream tool (SPEC §22): `read_only`
    (only an operator's file can make an upstream tool read-only), `reversible: false`
    (stricter), the upstream read tool whose answer previews it, and its timeout."""

    name: str
    read_only: bool | None = None
    reversible: bool | None = None
    preview: str | None = None
    # How long a call may wait for its answer (None: 60 s).
    timeout_s: float | None = None


@dataclass(frozen=True)
class ServerSpec:
    """An upstream MCP server (`ROOT/servers/NAME/server.yaml`, SPEC §22): started by
    `command` (stdio) or reached at `url` (streamable HTTP, with the secret `bearer_secret`
    as its bearer token), with a fixed `env` and declared `secrets`; a stdio server's process
    is confined by `reads`, `writes`, `network` and `limits` as a tool's is. `$WORKSPACE` in
    `command` and `env` is the caller's workspace. `accepted` holds the digests of the tool
    definitions an admin accepted ((upstream tool, digest)), filled in from the store."""

    name: str
    description: str
    folder: Path
    path: Path
    command: tuple[str, ...] = ()
    url: str | None = None
    bearer_secret: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    secrets: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    network: NetworkReach = field(default_factory=NetworkReach)
    limits: ToolLimits = field(default_factory=ToolLimits)
    tools: tuple[ServerToolRule, ...] = ()
    accepted: tuple[tuple[str, str], ...] = ()

    def rule(self, tool: str) -> ServerToolRule:
        """What `server.yaml` says of upstream tool `tool` (nothing: an empty rule)."""
        return next((r for r in self.tools if r.name == tool), ServerToolRule(tool))

    def accepted_digest(self, tool: str) -> str | None:
        """The digest of `tool`'s accepted definition, or None when none is accepted."""
        return next((d for name, d in self.accepted if name == tool), None)
