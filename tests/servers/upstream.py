"""A small upstream MCP server for aat's tests (SPEC §22), on the official SDK.

`python upstream.py DEFINITION_FILE`: the description of its `note` tool is read from
DEFINITION_FILE at start (so a test changes a definition between starts). Tools: `peek`
(read-only hint; answers its environment's SECRET_TOKEN, which aat must mask), `note`
(writes `text` to `notes.txt` in the folder it is given, appending: a second run shows),
`fail` (an `isError` answer), `die` (the process exits mid-call).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

definition = Path(sys.argv[1]).read_text().strip() if len(sys.argv) > 1 else "Write a note"
server = MCPServer("aat-test-upstream")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def peek() -> str:
    """Show the token this server was given."""
    return f"token is {os.environ.get('SECRET_TOKEN', '')}"


@server.tool(description=definition)
def note(folder: str, text: str) -> str:
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
