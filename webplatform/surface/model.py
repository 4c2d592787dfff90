"""The chat surface's nouns: a declaration file, its published tools and their pinned arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from webplatform.registry.argmodel import property_schema
from webplatform.registry.model import ArgType, RunnableKind

# What the gate may say of a published action. "irreversible" is never publishable.
PublishedReversibility = Literal["read-only", "reversible"]
DECLARATION_FILE = "chat_surface.yaml"


@dataclass(frozen=True)
class PublishedArg:
    """One argument as published: the shape pinned from the manifest, plus curated wording."""

    name: str
    type: ArgType
    required: bool = False
    default: Any = None
    enum: tuple[Any, ...] | None = None
    description: str = ""

    def json_schema(self) -> dict[str, Any]:
        """This argument as a JSON Schema property."""
        return property_schema(self.type, self.description, self.default, self.enum)


@dataclass(frozen=True)
class Key:
    """What a published tool runs: one action of one registry tool or agent."""

    kind: RunnableKind
    name: str
    action: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name} {self.action}"


@dataclass(frozen=True)
class PublishedTool:
    """One entry of `tools:`: a registry action published under a namespaced name."""

    namespace: str
    key: Key
    description: str
    reversibility: PublishedReversibility
    args: tuple[PublishedArg, ...] = ()
    title: str | None = None
    # Replaces `<tool>_<action>` in the published name when the full name would overflow.
    short: str | None = None
    line: int | None = None

    def input_schema(self) -> dict[str, Any]:
        """The published `inputSchema`: exactly the pinned arguments, nothing else accepted."""
        return {
            "type": "object",
            "properties": {a.name: a.json_schema() for a in self.args},
            "required": [a.name for a in self.args if a.required],
            "additionalProperties": False,
        }


@dataclass(frozen=True)
class ServerIdentity:
    """Who the chat server says it is, and what `aat surface export` publishes."""

    name: str = "aat-chat"
    title: str = "aat chat"
    description: str = "A curated set of local aat tools, one MCP tool per operation."
    # Reverse-DNS registry name for server.json (exactly one slash).
    registry_name: str = "io.github.aat/aat-chat"
    website_url: str | None = None
    instructions: str | None = None


@dataclass(frozen=True)
class Declaration:
    """A loaded `chat_surface.yaml`."""

    path: Path
    surface_version: str
    server: ServerIdentity
    tools: tuple[PublishedTool, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the declaration, or one difference from the registry.

    `kind` names the difference (`missing-action`, `new-argument`, `irreversible`, ...), so
    tests and scripts can tell them apart; `message` says what is wrong and how to fix it.
    """

    kind: str
    message: str
    path: Path | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path or "")
        return f"{where}: {self.message}" if where else self.message
