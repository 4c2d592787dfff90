"""The curated chat surface's declaration: `chat_surface.yaml`, its names, its check.

The MCP server that publishes it lives in `webplatform.mcp.chat`; this package knows nothing of
MCP, so `aat check` and both surfaces can use it.

- `find_declaration(roots)` / `load_declaration(path)`: read the file, naming each bad line.
- `check_declaration(declaration, registry)`: every difference from the registry.
- `NameTable`: published name <-> registry action, resolved against the declared set.
"""

from webplatform.surface.check import (
    check_declaration,
    check_lines,
    load_and_check,
    tool_problems,
)
from webplatform.surface.load import find_declaration, load_declaration
from webplatform.surface.model import (
    DECLARATION_FILE,
    Declaration,
    Key,
    Problem,
    PublishedArg,
    PublishedTool,
    ServerIdentity,
)
from webplatform.surface.names import NAME_BUDGET, NameTable, forward_name, name_room, sanitize

__all__ = [
    "DECLARATION_FILE",
    "NAME_BUDGET",
    "Declaration",
    "Key",
    "NameTable",
    "Problem",
    "PublishedArg",
    "PublishedTool",
    "ServerIdentity",
    "check_declaration",
    "check_lines",
    "find_declaration",
    "forward_name",
    "load_and_check",
    "load_declaration",
    "name_room",
    "sanitize",
    "tool_problems",
]
