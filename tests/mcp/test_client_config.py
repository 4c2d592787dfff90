"""`aat config opencode|claude`: absolute command, each argv element separate, and it starts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from webplatform.mcp import config_claude, config_opencode

INITIALIZE = (
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    '"capabilities":{},"clientInfo":{"name":"cfg","version":"1"}}}\n'
)


def initialize(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Start the configured command in `cwd` and send it one `initialize`."""
    return subprocess.run(
        command,
        input=INITIALIZE,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "AAT_HOME": str(cwd / "home")},
        timeout=60,
    )


def test_opencode_block_shape() -> None:
    block = config_opencode()["mcp"]["aat"]
    assert block["type"] == "local" and block["enabled"] is True
    command = block["command"]
    assert Path(command[0]).is_absolute()
    assert command[-1] == "mcp" and all(" " not in part or Path(part).exists() for part in command)


def test_claude_block_matches_opencode() -> None:
    server = config_claude()["mcpServers"]["aat"]
    assert [server["command"], *server["args"]] == config_opencode()["mcp"]["aat"]["command"]


@pytest.mark.integration
def test_configured_command_starts_from_another_directory(tmp_path: Path) -> None:
    command = config_opencode()["mcp"]["aat"]["command"]
    proc = initialize(command, tmp_path)
    assert '"protocolVersion":"2025-11-25"' in proc.stdout.replace(" ", ""), proc.stderr


@pytest.mark.integration
def test_chat_surface_config_starts_the_chat_server(tmp_path: Path) -> None:
    command = config_opencode("chat")["mcp"]["aat-chat"]["command"]
    assert command[-3:] == ["mcp", "--surface", "chat"]
    server = config_claude("chat")["mcpServers"]["aat-chat"]
    assert [server["command"], *server["args"]] == command
    proc = initialize(command, tmp_path)
    assert '"name":"aat-chat"' in proc.stdout.replace(" ", ""), proc.stderr
