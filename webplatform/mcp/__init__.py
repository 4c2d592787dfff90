"""The MCP bridge: the seven aat tools on the official SDK's `MCPServer`, over stdio and HTTP.

- `build_server(platform, surface=...)`: the `MCPServer` (tools, approvals resource, digest).
- `run_stdio(settings)`: `aat mcp`.
- `create_mcp_app(platform)`: the ASGI app and lifespan `aat serve` mounts at `/mcp`.
- `config_opencode()` / `config_claude()`: `aat config opencode|claude`.
"""

from typing import Any

from webplatform.mcp.client_config import config_claude, config_opencode
from webplatform.mcp.server import build_server
from webplatform.mcp.stdio import run_stdio

__all__ = ["build_server", "config_claude", "config_opencode", "create_mcp_app", "run_stdio"]


def __getattr__(name: str) -> Any:
    # The HTTP transport (Starlette, the session manager) is imported only when asked for:
    # `aat mcp` speaks stdio and should not pay for it at every start.
    if name == "create_mcp_app":
        from webplatform.mcp.http import create_mcp_app

        return create_mcp_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
