"""Upstream MCP servers as operators see them (SPEC §22): listed, shown with their pinned
definitions and the difference of a held one, accepted by an admin, imported from a client's
configuration. `aat servers ...` and the dashboard's server pages both come here.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Accepted definitions are signed rows, checked with the seal `trust.authority` installs.
import webplatform.trust.authority  # noqa: F401  (imported for that)
from webplatform.platform import Platform
from webplatform.process import confine, server_pool
from webplatform.process.server_link import Launch
from webplatform.registry import resolve_secrets
from webplatform.registry.model import ServerSpec
from webplatform.registry.servers import server_tool, upstream_read_only
from webplatform.store import servers as pins


class ServerProblem(Exception):
    """A server that is not known or cannot be reached; the message is one line."""


@dataclass(frozen=True)
class Listed:
    """A server as `aat servers list` shows it: its tools by state, or why it did not answer."""

    name: str
    description: str
    transport: str
    accepted: tuple[str, ...]
    held: tuple[str, ...]
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The JSON object `aat servers list` prints."""
        shown = {
            "name": self.name,
            "description": self.description,
            "transport": self.transport,
            "accepted": list(self.accepted),
            "held": list(self.held),
        }
        return shown | ({"error": self.error} if self.error else {})


def find(platform: Platform, name: str) -> ServerSpec:
    """Server `name` of the registry, or `ServerProblem`."""
    registry = platform.registry()
    server = registry.servers.get(name)
    if server is None:
        known = ", ".join(registry.servers) or "none"
        raise ServerProblem(f"no server {name!r} in the registry (servers: {known})")
    return server


def refresh(platform: Platform, server: ServerSpec, cwd: Path | None = None) -> list[str]:
    """Connect to `server` (starting it if needed), record what it lists (held when new or
    changed); the tools it held. `ServerProblem` when it cannot be reached."""
    settings = platform.settings
    fence = confine.Fence.from_settings(settings)
    tool = server_tool(server, [])
    secrets = resolve_secrets(tool.secrets)
    launch = Launch(tool, server_pool.workspace_of(fence, cwd), secrets, fence, cwd)
    try:
        link = server_pool.POOL.link(launch)
    except Exception as exc:
        raise ServerProblem(server_pool.launch_problem(server, exc)) from exc
    return platform.record_seen(server.name, link.tools)


def overview(platform: Platform, cwd: Path | None = None) -> list[Listed]:
    """Every server, each connected to once so its new or changed tools are recorded."""
    listed: list[Listed] = []
    for name, server in platform.registry().servers.items():
        error = None
        try:
            refresh(platform, server, cwd)
        except ServerProblem as exc:
            error = str(exc)
        registry = platform.registry()
        tool = registry.tools.get(name)
        accepted = tuple(a.name for a in tool.actions) if tool else ()
        held = registry.held.get(name, ())
        transport = "http" if server.url else "stdio"
        listed.append(Listed(name, server.description, transport, accepted, held, error))
    return listed


def details(
    platform: Platform, name: str, cwd: Path | None = None, *, connect: bool = True
) -> dict[str, Any]:
    """Server `name` with each recorded definition (state, digest, gate) and, for each held
    one, its difference from the accepted definition of the same tool; connected to first
    (so new or changed definitions are recorded) unless `connect` is False."""
    server = find(platform, name)
    error = None
    try:
        if connect:
            refresh(platform, server, cwd)
    except ServerProblem as exc:
        error = str(exc)
    rows = platform.server_pins.of(name)
    accepted = {r.tool: json.loads(r.definition_json) for r in rows if r.state == pins.ACCEPTED}
    tools = []
    for row in rows:
        if row.state == pins.REPLACED:
            continue
        definition = json.loads(row.definition_json)
        shown = {
            "tool": row.tool,
            "state": row.state,
            "digest": row.digest,
            "gate": "read-only" if upstream_read_only(server, definition) else "irreversible",
            "description": definition.get("description") or "",
        }
        if row.state == pins.HELD:
            shown["difference"] = difference(accepted.get(row.tool), definition)
        tools.append(shown)
    found = {"name": name, "description": server.description, "tools": tools}
    return found | ({"error": error} if error else {})


def difference(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    """A unified diff of two definitions as pretty JSON (all lines added for a new tool)."""
    old = json.dumps(before, indent=2, sort_keys=True).splitlines() if before else []
    new = json.dumps(after, indent=2, sort_keys=True).splitlines()
    return "\n".join(difflib.unified_diff(old, new, "accepted", "held", lineterm=""))


def accept(
    platform: Platform, name: str, *, by: str, shown: frozenset[str] | None = None
) -> list[str]:
    """Accept every held definition of server `name` (with `shown`, only those whose digests
    the admin was shown), as admin `by` (whose step-up the caller checked); the tools
    accepted. Only what was recorded, and so could be shown, is accepted: the server is not
    asked again here."""
    find(platform, name)
    return platform.server_pins.accept(name, by, shown)


def held_digests(platform: Platform, name: str) -> frozenset[str]:
    """The digests of server `name`'s held definitions, as its page shows them."""
    return frozenset(r.digest for r in platform.server_pins.of(name) if r.state == pins.HELD)
