"""A small upstream MCP server for aat's tests (SPEC §22), on the official SDK.

`python upstream.py DEFINITION_FILE`: the description of its `peek` tool is read from
DEFINITION_FILE at start (so a test changes a definition between starts). Tools: `peek`
(read-only hint; answers its environment's SECRET_TOKEN, which aat must mask), `read`
(read-only hint; a file's text), `note` (appends `text` to `notes.txt` in `folder`: a
second run shows), `fail` (an `isError` answer), `die` (the process exits mid-call).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

definition = Path(sys.argv[1]).read_text().strip() if len(sys.argv) > 1 else "Show the token"
server = MCPServer("aat-test-upstream")


@server.tool(description=definition, annotations=ToolAnnotations(readOnlyHint=True))
def peek() -> str:
    return f"token is {os.environ.get('SECRET_TOKEN', '')}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read(path: str) -> str:
    """A file's text."""
    return Path(path).read_text()


@server.tool()
def note(folder: str, text: str) -> str:
    """Append a line to notes.txt in a folder."""
    with (Path(folder) / "notes.txt").open("a") as out:
        out.write(text + "\n")
    return "written"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def fail() -> str:
    """Always fails."""
    raise ValueError("upstream says no")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def die() -> str:
    """Exit at once."""
    os._exit(3)


if __name__ == "__main__":
    server.run()
