"""The floor for B1: a minimal `MCPServer` whose one tool spawns the hello-world command.

No registry, database, validation or gate: only the SDK over stdio and one subprocess per
call, run from a worker thread the way aat's bridge runs its runner.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import MCPServer

from bench.common import HELLO, PYTHON

server: MCPServer[Any] = MCPServer("minimal")


def _spawn(name: str) -> dict[str, Any]:
    proc = subprocess.run(
        [PYTHON, str(HELLO), "greet", "--name", name],
        cwd=HELLO.parent,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        check=False,
    )
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@server.tool(structured_output=False)
async def run_tool(tool: str, args: dict[str, Any]) -> str:
    """Run hello-world greet (the only tool) and answer its JSON."""
    del tool
    result = await anyio.to_thread.run_sync(lambda: _spawn(str(args.get("name", ""))))
    return json.dumps({"status": "succeeded", "result": result})


if __name__ == "__main__":
    anyio.run(server.run_stdio_async)
