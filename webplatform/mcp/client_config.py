"""`aat config opencode|claude|codex|gemini`: ready-to-paste MCP client configuration.

With `--url`, the block connects to a running `aat serve`'s `/mcp` instead, sending the agent
token from the client's environment (`AAT_AGENT_TOKEN`): the token itself is never written
into the block, so the file can be shared and committed.

The command is absolute, so the block works from any working directory: the `aat` console
script installed next to the running interpreter when there is one, else that interpreter with
`-m webplatform`. Each argv element is its own list item (no shell, no quoting to get wrong).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

SERVER_KEY = "aat"
# The chat surface registers under its own key, the one its 64-character name budget assumes.
SERVER_KEYS = {"generic": SERVER_KEY, "chat": "aat-chat"}


def aat_command() -> list[str]:
    """The absolute argv of `aat` itself: the console script next to this interpreter, or
    the interpreter with `-m webplatform`."""
    python = Path(sys.executable).absolute()
    script = python.parent / ("aat.exe" if os.name == "nt" else "aat")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(python), "-m", "webplatform"]


def bridge_command(surface: str = "generic") -> list[str]:
    """The absolute argv that starts the stdio bridge (`aat mcp [--surface chat]`)."""
    tail = ["mcp"] if surface == "generic" else ["mcp", "--surface", surface]
    return [*aat_command(), *tail]


def config_opencode(surface: str = "generic") -> dict[str, Any]:
    """The `mcp` block for opencode.json."""
    entry = {"type": "local", "command": bridge_command(surface), "enabled": True}
    return {"mcp": {SERVER_KEYS[surface]: entry}}


def config_claude(surface: str = "generic") -> dict[str, Any]:
    """The `mcpServers` block for Claude Code (`.mcp.json`)."""
    command, *args = bridge_command(surface)
    return {"mcpServers": {SERVER_KEYS[surface]: {"command": command, "args": args}}}


TOKEN_ENV = "AAT_AGENT_TOKEN"


def remote_opencode(url: str) -> dict[str, Any]:
    """opencode's block for a running `aat serve`: a remote server, token from the environment.

    `{env:NAME}` is opencode's config substitution; `oauth: false` keeps opencode from starting
    an OAuth flow when the token is missing (the 401 then says what to set).
    """
    entry = {
        "type": "remote",
        "url": url,
        "headers": {"Authorization": f"Bearer {{env:{TOKEN_ENV}}}"},
        "oauth": False,
        "enabled": True,
    }
    return {"mcp": {SERVER_KEY: entry}}


def remote_claude(url: str) -> dict[str, Any]:
    """Claude Code's block for a running `aat serve`: streamable HTTP, token from `${...}`."""
    entry = {
        "type": "http",
        "url": url,
        "headers": {"Authorization": f"Bearer ${{{TOKEN_ENV}}}"},
    }
    return {"mcpServers": {SERVER_KEY: entry}}


def sign_in_opencode(url: str) -> dict[str, Any]:
    """opencode's plain remote block (no token, no command): on the first 401 opencode signs
    in through the browser and keeps the token itself (SPEC §18)."""
    return {"mcp": {SERVER_KEY: {"type": "remote", "url": url, "enabled": True}}}


def sign_in_claude(url: str) -> dict[str, Any]:
    """Claude Code's plain remote block: it signs in through the browser (`/mcp` in Claude
    Code, then Authenticate) and keeps the token itself."""
    return {"mcpServers": {SERVER_KEY: {"type": "http", "url": url}}}


# Clients that end a tool call at a fixed time whatever progress says (Codex: 60 s by
# default) are given this much: well above aat's own wait for an operator
# (AAT_APPROVAL_WAIT_S, 50 s by default), so aat always answers first, with the outcome or
# `pending_approval` and the job id, and the call is never cut off with the id unseen.
def client_tool_timeout_s(approval_wait_s: float) -> int:
    """The tool-call timeout written into client blocks for an approval wait of that length."""
    return max(120, int(approval_wait_s * 2))


def _server_entry(
    url: str | None, sign_in: bool, *, url_key: str, token: dict[str, Any]
) -> dict[str, Any]:
    """A client's entry for aat: the stdio bridge, or `url` under the client's own key, with
    `token` (how it sends the agent token) unless it signs in through the browser."""
    if url is None:
        command, *args = bridge_command()
        return {"command": command, "args": args}
    return {url_key: url} if sign_in else {url_key: url, **token}


def config_codex(*, approval_wait_s: float, url: str | None = None, sign_in: bool = False) -> str:
    """Codex's `[mcp_servers.aat]` table for `~/.codex/config.toml` (TOML): the stdio bridge,
    or with `url` a running `aat serve`, the token from the environment; with `sign_in` too,
    no token at all (`codex mcp login aat` signs in through the browser and keeps it)."""
    token = {"bearer_token_env_var": TOKEN_ENV}
    entry = _server_entry(url, sign_in, url_key="url", token=token)
    entry |= {
        "startup_timeout_sec": 30,
        "tool_timeout_sec": client_tool_timeout_s(approval_wait_s),
        # Without it `codex exec` refuses every call it would have asked about; aat's own
        # operator approves what is irreversible, in the dashboard.
        "default_tools_approval_mode": "approve",
    }
    lines = [f"[mcp_servers.{SERVER_KEY}]"]
    # TOML's basic strings and arrays of them read JSON's string escapes as they are.
    lines += [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


def config_gemini(
    *, approval_wait_s: float, url: str | None = None, sign_in: bool = False
) -> dict[str, Any]:
    """Gemini CLI's `mcpServers` block for `settings.json`: the stdio bridge, or with `url` a
    running `aat serve` (`$AAT_AGENT_TOKEN` is expanded by Gemini CLI from its environment);
    with `sign_in` too, no token at all (`/mcp auth aat` signs in through the browser)."""
    token = {"headers": {"Authorization": f"Bearer ${TOKEN_ENV}"}}
    entry = _server_entry(url, sign_in, url_key="httpUrl", token=token)
    entry["timeout"] = client_tool_timeout_s(approval_wait_s) * 1000
    return {"mcpServers": {SERVER_KEY: entry}}
