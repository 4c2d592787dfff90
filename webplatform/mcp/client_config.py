"""`aat config opencode|claude`: ready-to-paste MCP client configuration for the stdio bridge.

The command is absolute, so the block works from any working directory: the `aat` console
script installed next to the running interpreter when there is one, else that interpreter with
`-m webplatform`. Each argv element is its own list item (no shell, no quoting to get wrong).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

SERVER_KEY = "aat"


def bridge_command() -> list[str]:
    """The absolute argv that starts the stdio bridge (`aat mcp`)."""
    python = Path(sys.executable).absolute()
    script = python.parent / ("aat.exe" if os.name == "nt" else "aat")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), "mcp"]
    return [str(python), "-m", "webplatform", "mcp"]


def config_opencode() -> dict[str, Any]:
    """The `mcp` block for opencode.json."""
    return {"mcp": {SERVER_KEY: {"type": "local", "command": bridge_command(), "enabled": True}}}


def config_claude() -> dict[str, Any]:
    """The `mcpServers` block for Claude Code (`.mcp.json`)."""
    command, *args = bridge_command()
    return {"mcpServers": {SERVER_KEY: {"command": command, "args": args}}}
