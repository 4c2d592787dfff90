"""The MCP bridge: the seven aat tools on the official SDK's `MCPServer`, over stdio and HTTP.

- `build_server(platform, surface=...)`: the `MCPServer` (tools, approvals resource, digest).
- `run_stdio(settings)`: `aat mcp`.
- `create_mcp_app(platform)`: the ASGI app and lifespan `aat serve` mounts at `/mcp`.
- `config_opencode()` / `config_claude()`: `aat config opencode|claude`.
"""

from webplatform.mcp.client_config import config_claude, config_opencode
from webplatform.mcp.http import create_mcp_app
from webplatform.mcp.server import build_server
from webplatform.mcp.stdio import run_stdio

__all__ = ["build_server", "config_claude", "config_opencode", "create_mcp_app", "run_stdio"]
