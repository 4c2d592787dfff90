"""The registry: tool, agent and skill manifests and upstream MCP servers' `server.yaml` files
(`servers`, `server_import`), loaded from disk, validated, cached by mtime."""

from webplatform.registry.loader import RegistryLoader
from webplatform.registry.model import (
    ARG_TYPES,
    RUNTIMES,
    ActionSpec,
    ArgSpec,
    ArgType,
    Kind,
    ManifestError,
    Registry,
    RunnableKind,
    Runtime,
    SkillSpec,
    ToolSpec,
)
from webplatform.registry.secrets import resolve_secrets, secret_present, secret_status

__all__ = [
    "ARG_TYPES",
    "RUNTIMES",
    "ActionSpec",
    "ArgSpec",
    "ArgType",
    "Kind",
    "ManifestError",
    "Registry",
    "RegistryLoader",
    "RunnableKind",
    "Runtime",
    "SkillSpec",
    "ToolSpec",
    "resolve_secrets",
    "secret_present",
    "secret_status",
]
