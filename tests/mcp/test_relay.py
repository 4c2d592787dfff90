"""`aat mcp --url`: a real `aat serve` process and the relay process, driven by the SDK client.

The relay runs with an `AAT_HOME` that must never appear: it opens no database and reads no
registry; everything it answers comes from the server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp_helpers import body
from serving import aat_env, aat_serve, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.integration]  # starts aat processes

AAT = [sys.executable, "-m", "webplatform"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A running `aat serve` with one agent token; yields its /mcp URL and the token."""
    env = aat_env(AAT_HOME=str(tmp_path / "server-home"), AAT_APPROVAL_WAIT_S="4")
    minted = subprocess.run(
        [*AAT, "agent", "add", "build-bot"], env=env, capture_output=True, text=True, timeout=60
    )
    assert minted.returncode == 0, minted.stderr
    with aat_serve(env=env, port=free_port(), log=tmp_path / "serve.log") as base:
        yield f"{base}/mcp", minted.stdout.strip()


def relay_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # An AAT_HOME (and HOME) the relay must not create or read.
    return aat_env(
        AAT_HOME=str(tmp_path / "relay-home"), HOME=str(tmp_path / "relay-user"), **extra
    )


def relay(tmp_path: Path, url: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """The relay started by hand with stdin closed: for the start-up failures."""
    return subprocess.run(
        [*AAT, "mcp", "--url", url],
        env=relay_env(tmp_path, **extra),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_relay_lists_runs_and_queues_through_the_server(
    server: tuple[str, str], tmp_path: Path
) -> None:
    url, token = server
    params = StdioServerParameters(
        command=AAT[0],
        args=[*AAT[1:], "mcp", "--url", url],
        env=relay_env(tmp_path, AAT_AGENT_TOKEN=token),
    )
    seen: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"run_tool", "run_tool_confirmed", "job_status", "capabilities"} <= names
        ran = body(
            await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "Ada"}})
        )
        assert ran["status"] == "succeeded" and ran["result"] == {"greeting": "Hello, Ada!"}
        queued = await client.call_tool(
            "run_tool_confirmed",
            {
                "tool": "outbox",
                "action": "send-message",
                "args": {"to": "ops@example.org", "subject": "hi", "body": "x"},
            },
            progress_callback=on_progress,
        )
        answer = body(queued)
        assert answer["status"] == "pending_approval" and queued.is_error is False
        status = body(await client.call_tool("job_status", {"job": answer["job"]}))
        assert status["status"] == "pending_approval"
    assert seen, "the server's progress notifications reach the stdio client"
    assert not (tmp_path / "relay-home").exists()
    assert not (tmp_path / "relay-user").exists()


def test_server_down_is_one_line_and_exit_1(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    done = relay(tmp_path, url, AAT_AGENT_TOKEN="aat_whatever")
    assert done.returncode == 1 and done.stdout == ""
    line = done.stderr.strip()
    assert "\n" not in line and f"cannot reach aat at {url}" in line and "aat serve" in line
    assert not (tmp_path / "relay-home").exists()


def test_missing_wrong_and_foreign_urls_are_named(server: tuple[str, str], tmp_path: Path) -> None:
    url, _token = server
    missing = relay(tmp_path, url)
    assert missing.returncode == 1
    assert "requires an agent token: set AAT_AGENT_TOKEN" in missing.stderr
    wrong = relay(tmp_path, url, AAT_AGENT_TOKEN="aat_not-a-token")
    assert wrong.returncode == 1
    assert "refused AAT_AGENT_TOKEN" in wrong.stderr and "aat_not-a-token" not in wrong.stderr
    foreign = relay(tmp_path, url.removesuffix("/mcp") + "/not-mcp", AAT_AGENT_TOKEN="x")
    assert foreign.returncode == 1 and "not an aat MCP endpoint" in foreign.stderr
    for done in (missing, wrong, foreign):
        assert done.stderr.strip().count("\n") == 0, done.stderr


def test_url_comes_from_the_environment_too(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    done = subprocess.run(
        [*AAT, "mcp"],
        env=relay_env(tmp_path, AAT_MCP_URL=url),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and f"cannot reach aat at {url}" in done.stderr
    assert not (tmp_path / "relay-home").exists()


@pytest.mark.parametrize("client", ["opencode", "claude"])
def test_config_url_blocks_take_the_token_from_the_environment(client: str) -> None:
    env = aat_env(AAT_AGENT_TOKEN="aat_secret-value")
    done = subprocess.run(
        [*AAT, "config", client, "--url", "http://127.0.0.1:8000/mcp"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "aat_secret-value" not in done.stdout
    block = json.loads(done.stdout)
    if client == "opencode":
        entry = block["mcp"]["aat"]
        assert entry["type"] == "remote" and entry["url"] == "http://127.0.0.1:8000/mcp"
        assert entry["headers"] == {"Authorization": "Bearer {env:AAT_AGENT_TOKEN}"}
    else:
        entry = block["mcpServers"]["aat"]
        assert entry["type"] == "http" and entry["url"] == "http://127.0.0.1:8000/mcp"
        assert entry["headers"] == {"Authorization": "Bearer ${AAT_AGENT_TOKEN}"}
