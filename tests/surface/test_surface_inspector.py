"""The MCP Inspector CLI's `--strict` schema-portability check against the chat surface."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from surface_helpers import EXAMPLE_NAMES

INSPECTOR = Path(__file__).parents[1] / "mcp" / "node" / "node_modules" / ".bin" / "mcp-inspector"
pytestmark = pytest.mark.integration


def strict_tools_list(tmp_path: Path, *target: str, era: str = "legacy") -> list[str]:
    """Run `--strict --method tools/list`; assert a clean exit; return the listed names."""
    # A loaded 2-core machine can take over the Inspector's default 15 s to start a stdio bridge.
    args = ["--cli", "--strict", "--protocol-era", era, "--connect-timeout", "60000",
            "--method", "tools/list", *target]  # fmt: skip
    env = {**os.environ, "AAT_HOME": str(tmp_path / "home"), "MCP_CATALOG_PATH": str(
        tmp_path / "catalog.json")}  # fmt: skip
    done = subprocess.run(
        [str(INSPECTOR), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    # Exit 6 means an error-severity portability problem; stderr then names each one.
    assert done.returncode == 0, done.stderr
    assert "Error:" not in done.stderr
    return [tool["name"] for tool in json.loads(done.stdout)["tools"]]


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_chat_surface_passes_strict_over_stdio(tmp_path: Path, root: Path, era: str) -> None:
    # The Inspector hands a stdio server only a few variables of its own; AAT_HOME goes by -e.
    home = ["-e", f"AAT_HOME={tmp_path / 'home'}"]
    bridge = [sys.executable, "-m", "webplatform", "mcp", "--surface", "chat"]
    names = strict_tools_list(tmp_path, *home, *bridge, "--registry", str(root), era=era)
    assert sorted(names) == EXAMPLE_NAMES


def test_chat_surface_passes_strict_over_http(tmp_path: Path, base_url: str) -> None:
    names = strict_tools_list(tmp_path, f"{base_url}/mcp/chat", "--transport", "http")
    assert sorted(names) == EXAMPLE_NAMES
