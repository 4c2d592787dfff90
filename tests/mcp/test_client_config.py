"""`aat config CLIENT`: absolute commands, each argv element apart, and they start."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from webplatform.mcp import config_claude, config_opencode
from webplatform.mcp.client_config import aat_command, config_codex, config_gemini

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


def test_codex_block_is_toml_with_a_timeout_above_the_approval_wait() -> None:
    # Codex ends a tool call at tool_timeout_sec (60 s by default) whatever progress says;
    # aat must answer first, or the agent never learns the job id.
    table = tomllib.loads(config_codex(approval_wait_s=50))["mcp_servers"]["aat"]
    assert [table["command"], *table["args"]] == config_opencode()["mcp"]["aat"]["command"]
    assert table["tool_timeout_sec"] > 50
    # `codex exec` never asks its user: without this it refuses aat's irreversible tools.
    assert table["default_tools_approval_mode"] == "approve"
    longer = tomllib.loads(config_codex(approval_wait_s=100))["mcp_servers"]["aat"]
    assert longer["tool_timeout_sec"] > 100
    remote = tomllib.loads(config_codex(approval_wait_s=50, url="http://127.0.0.1:8000/mcp"))
    entry = remote["mcp_servers"]["aat"]
    assert entry["url"] == "http://127.0.0.1:8000/mcp"
    assert entry["bearer_token_env_var"] == "AAT_AGENT_TOKEN", "the token stays out of the file"
    assert "command" not in entry


def test_gemini_block_matches_opencode_and_waits_longer_than_aat() -> None:
    server = config_gemini(approval_wait_s=50)["mcpServers"]["aat"]
    assert [server["command"], *server["args"]] == config_opencode()["mcp"]["aat"]["command"]
    assert server["timeout"] > 50_000  # milliseconds
    remote = config_gemini(approval_wait_s=50, url="http://h/mcp")["mcpServers"]["aat"]
    assert remote["httpUrl"] == "http://h/mcp"
    assert remote["headers"] == {"Authorization": "Bearer $AAT_AGENT_TOKEN"}


@pytest.mark.integration
@pytest.mark.parametrize("client", ["codex", "gemini"])
def test_aat_config_prints_a_block_whose_command_starts(client: str, tmp_path: Path) -> None:
    printed = subprocess.run(
        [*aat_command(), "config", client],
        capture_output=True,
        text=True,
        env={**os.environ, "AAT_HOME": str(tmp_path / "home")},
        timeout=60,
        check=True,
    ).stdout
    if client == "codex":
        entry = tomllib.loads(printed)["mcp_servers"]["aat"]
    else:
        entry = json.loads(printed)["mcpServers"]["aat"]
    proc = initialize([entry["command"], *entry["args"]], tmp_path)
    assert '"protocolVersion":"2025-11-25"' in proc.stdout.replace(" ", ""), proc.stderr


@pytest.mark.parametrize("client", ["opencode", "claude", "codex", "gemini"])
def test_sign_in_prints_the_plain_remote_block(
    client: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from webplatform.cli.main import main

    url = "http://127.0.0.1:8000/mcp"
    assert main(["config", client, "--url", url, "--sign-in"]) == 0
    printed = capsys.readouterr().out
    if client == "opencode":
        entry = json.loads(printed)["mcp"]["aat"]
        assert entry == {"type": "remote", "url": url, "enabled": True}
    elif client == "claude":
        entry = json.loads(printed)["mcpServers"]["aat"]
        assert entry == {"type": "http", "url": url}
    elif client == "codex":
        assert tomllib.loads(printed)["mcp_servers"]["aat"]["url"] == url
    else:
        assert json.loads(printed)["mcpServers"]["aat"]["httpUrl"] == url
    assert "AAT_AGENT_TOKEN" not in printed and "Authorization" not in printed


@pytest.mark.parametrize(
    "argv", [["config", "opencode", "--sign-in"], ["config", "codex", "--sign-in"]]
)
def test_sign_in_needs_a_url(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from webplatform.cli.main import main

    assert main(argv) == 2
    assert "aat config --sign-in: give --url URL" in capsys.readouterr().err
