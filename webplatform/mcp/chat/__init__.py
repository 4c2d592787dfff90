"""The curated chat surface: only the tools `chat_surface.yaml` declares, on its own server.

- `build_chat_server(platform, surface=...)`: the `MCPServer` (`aat mcp --surface chat`).
- `server_json(declaration, registry, url=...)`: `aat surface export`.
"""

from webplatform.mcp.chat.export import export_server_json, exported_digest, server_json
from webplatform.mcp.chat.server import (
    ChatSurfaceError,
    build_chat_server,
    chat_server,
    load_surface,
)

__all__ = [
    "ChatSurfaceError",
    "build_chat_server",
    "chat_server",
    "export_server_json",
    "exported_digest",
    "load_surface",
    "server_json",
]
