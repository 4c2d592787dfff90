"""The MCP bridge: the seven aat tools on the official SDK's `MCPServer`, over stdio and HTTP.

- `build_server(platform, surface=...)`: the `MCPServer` (tools, approvals resource, digest).
- `run_stdio(settings)`: `aat mcp`.
- `create_mcp_app(platform)`: the ASGI app and lifespan `aat serve` mounts at `/mcp`.
- `config_opencode()` / `config_claude()`: `aat config opencode|claude`.

Each is imported when first asked for: `aat mcp --url` (`relay`) uses none of them and should
not load the platform, the database layer or the HTTP transport to start.
"""

from importlib import import_module
from typing import Any

__all__ = ["build_server", "config_claude", "config_opencode", "create_mcp_app", "run_stdio"]

_HOMES = {
    "build_server": "webplatform.mcp.server",
    "run_stdio": "webplatform.mcp.transports.stdio",
    "create_mcp_app": "webplatform.mcp.transports.http",
    "config_claude": "webplatform.mcp.client_config",
    "config_opencode": "webplatform.mcp.client_config",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
