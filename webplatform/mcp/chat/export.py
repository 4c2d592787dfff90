"""`aat surface export`: the chat surface as a `server.json` for the MCP registry.

The tools digest in it is computed by building the very server `aat mcp --surface chat` runs
and hashing its `tools/list` exactly as `server/discover` does, so the two cannot disagree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import anyio
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from mcp_types.version import LATEST_MODERN_VERSION

import webplatform
from webplatform.mcp import protocol
from webplatform.registry.model import Registry
from webplatform.surface import Declaration, PublishedTool

from .server import SURFACE_VERSION_META_KEY, chat_server, load_surface

SERVER_SCHEMA: Final = (
    "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
)
PUBLISHER_META: Final = "io.modelcontextprotocol.registry/publisher-provided"
DESCRIPTION_MAX: Final = 100  # the registry refuses longer descriptions


async def _not_served(published: PublishedTool, _ctx: Context) -> CallToolResult:
    raise RuntimeError(f"export builds the chat server to list it, never to call {published.key}")


async def exported_digest(declaration: Declaration, registry: Registry) -> str:
    """The tools digest the chat server reports in `server/discover` (latest modern era)."""
    server = chat_server(declaration, registry, _not_served)
    return await protocol.wire_tools_digest(server, LATEST_MODERN_VERSION)


def server_json(
    declaration: Declaration, registry: Registry, *, url: str | None = None
) -> dict[str, Any]:
    """The `server.json` document: identity, surface version, package, remote, tools digest."""
    identity = declaration.server
    digest = anyio.run(exported_digest, declaration, registry)
    description = identity.description
    if len(description) > DESCRIPTION_MAX:
        description = description[: DESCRIPTION_MAX - 1] + "…"
    document: dict[str, Any] = {
        "$schema": SERVER_SCHEMA,
        "name": identity.registry_name,
        "title": identity.title,
        "description": description,
        "version": declaration.surface_version,
        "packages": [
            {
                "registryType": "pypi",
                "identifier": "aat",
                "version": webplatform.__version__,
                "runtimeHint": "uvx",
                "transport": {"type": "stdio"},
                "packageArguments": [
                    {"type": "positional", "value": "mcp"},
                    {"type": "named", "name": "--surface", "value": "chat"},
                ],
            }
        ],
        "_meta": {
            PUBLISHER_META: {
                protocol.TOOLS_DIGEST_META_KEY: digest,
                SURFACE_VERSION_META_KEY: declaration.surface_version,
                "aat/protocolVersion": LATEST_MODERN_VERSION,
                "aat/tools": len(declaration.tools),
            }
        },
    }
    if identity.website_url:
        document["websiteUrl"] = identity.website_url
    if url:
        document["remotes"] = [{"type": "streamable-http", "url": url}]
    return document


def export_server_json(
    *, roots: list[Path], registry: Registry, out: str | Path | None, url: str | None
) -> dict[str, Any]:
    """Check the chat surface and write its server.json to `out` (None: write nothing).

    Raises ChatSurfaceError when the declaration is missing or disagrees with the registry:
    a surface that does not check is never published.
    """
    document = server_json(load_surface(roots, registry), registry, url=url)
    if out is not None:
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        Path(out).write_text(text, encoding="utf-8")
    return document
