"""A small upstream MCP server for aat's tests (SPEC §22), on the official SDK.

`python upstream.py DEFINITION_FILE`: the description of its `peek` tool is read from
DEFINITION_FILE at start (so a test changes a definition between starts). Tools: `peek`
(read-only hint; answers its environment's SECRET_TOKEN, which aat must mask), `read`
(read-only hint; a file's text), `note` (appends `text` to `notes.txt` in `folder`: a
second run shows), `fail` (an `isError` answer), `die` (the process exits mid-call),
`hang` (never answers), `ask` (asks the client for input: elicitation). With a second
argument `garbage` it prints lines that are not JSON-RPC instead of serving.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

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


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def hang() -> str:
    """Never answers."""
    time.sleep(3600)
    return "late"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def ask(ctx: Context) -> str:
    """Ask the client for a value."""
    answer = await ctx.elicit("Which colour?", schema=Colour)
    return str(answer)


class Colour(BaseModel):
    colour: str


if __name__ == "__main__":
    if sys.argv[2:] == ["garbage"]:
        while True:
            print("this is not JSON-RPC", flush=True)
            time.sleep(0.1)
    server.run()
