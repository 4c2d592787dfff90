"""A small upstream MCP server for aat's tests (SPEC §22), on the official SDK.

`python upstream.py DEFINITION_FILE`: the description of its `peek` tool is read from
DEFINITION_FILE at start (so a test changes a definition between starts). Tools: `peek`
(read-only hint; answers its environment's SECRET_TOKEN, which aat must mask), `read`
(read-only hint; a file's text), `note` (appends `text` to `notes.txt` in `folder`: a
second run shows), `fail` (an `isError` answer), `die` (the process exits mid-call),
`hang` (never answers), `ask` (asks the client for input: elicitation), `grow` (adds a
tool `fresh`, changes `peek`'s description, and says its tool list changed, in either
era's way), `traced` (answers the `traceparent` its call came with). With a second
argument `garbage` it prints lines that are not JSON-RPC instead of serving; with `legacy`
it answers `server/discover` as a server before 2026-07-28 does (method not found), so its
clients speak the handshake era.
"""

from __future__ import annotations

import contextlib
import json
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


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def grow(ctx: Context) -> str:
    """Change this server's tools while it runs."""
    server.remove_tool("peek")
    server.add_tool(
        peek,
        description="Show the token, and then some",
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    server.add_tool(fresh, annotations=ToolAnnotations(readOnlyHint=True))
    await ctx.notify_tools_changed()  # a 2026-07-28 client's listen stream
    with contextlib.suppress(Exception):  # a handshake-era client's session
        await ctx.request_context.session.send_tool_list_changed()
    return "grown"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def traced(ctx: Context) -> str:
    """The W3C trace context this call came with (`params._meta.traceparent`)."""
    meta: dict[str, object] = dict(ctx.request_context.meta or {})
    return str(meta.get("traceparent", "none"))


def fresh() -> str:
    """A tool that came later."""
    return "fresh"


def refuse_discover() -> None:
    """Answer a client's opening `server/discover` as a server before 2026-07-28 does (the
    SDK's own server would take it): read byte by byte, so the SDK reads the rest itself."""
    line = b""
    while not line.endswith(b"\n"):
        line += os.read(0, 1) or b"\n"
    opening = json.loads(line)
    if opening.get("method") != "server/discover":
        raise SystemExit("expected server/discover first")
    error = {"code": -32601, "message": "Method not found"}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": opening["id"], "error": error}) + "\n")
    sys.stdout.flush()


class Colour(BaseModel):
    colour: str


if __name__ == "__main__":
    if sys.argv[2:] == ["garbage"]:
        while True:
            print("this is not JSON-RPC", flush=True)
            time.sleep(0.1)
    if sys.argv[2:] == ["legacy"]:
        refuse_discover()
    server.run()
