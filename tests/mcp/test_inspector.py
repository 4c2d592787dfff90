"""The MCP Inspector CLI (from npm, tests/mcp/node) against `aat mcp` and a real `aat serve`.

Each call is one `mcp-inspector --cli --protocol-era legacy|modern --format json` run, as a
user would type it: over stdio the Inspector starts `aat mcp` itself; over HTTP it talks to
/mcp on an `aat serve` process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from serving import aat_env, aat_serve, free_port
from sqlmodel import Session

from webplatform.config import Settings
from webplatform.jobs import decisions
from webplatform.jobs.tracking import pending_for
from webplatform.platform import Platform
from webplatform.store import make_engine
from webplatform.store.models import Job, JobState, Surface

pytestmark = pytest.mark.integration

INSPECTOR = Path(__file__).parent / "node" / "node_modules" / ".bin" / "mcp-inspector"
AAT = Path(sys.executable).with_name("aat")
TOOLS = [
    "capabilities",
    "run_tool",
    "run_agent",
    "run_tool_confirmed",
    "run_agent_confirmed",
    "get_skill",
    "job_status",
]
# The Inspector's exit code when a tool answers with isError: true.
TOOL_ERROR_EXIT = 5


@dataclass
class Target:
    """Where the Inspector connects: its target arguments, and the AAT_HOME behind them."""

    args: list[str]
    home: Path
    surface: Surface


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """`aat serve` on a free loopback port, with an AAT_HOME of its own."""
    folder = tmp_path_factory.mktemp("serve")
    home, port, log = folder / "aat-home", free_port(), folder / "serve.log"
    with aat_serve(env=aat_env(home), port=port, log=log) as url:
        yield Target(args=[f"{url}/mcp"], home=home, surface=Surface.mcp_http)


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """`aat mcp` started by the Inspector (stdio), or the module's `aat serve` (HTTP)."""
    if request.param == "http":
        served: Target = request.getfixturevalue("served")
        return served
    home = tmp_path / "aat-home"
    # The Inspector hands a stdio server only HOME, PATH and a few more; AAT_HOME goes by -e.
    return Target(
        args=["-e", f"AAT_HOME={home}", str(AAT), "mcp"], home=home, surface=Surface.mcp_stdio
    )


@pytest.fixture(params=["legacy", "modern"])
def protocol_era(request: pytest.FixtureRequest) -> str:
    """The Inspector's --protocol-era: `initialize` (legacy) or `server/discover` (modern)."""
    return str(request.param)


def inspect(
    tmp_path: Path, target: Target, era: str, *args: str, exit_code: int = 0
) -> dict[str, Any]:
    """Run one Inspector CLI call; check its exit code; return the `result` it printed."""
    state = tmp_path / "inspector"
    env = {
        **os.environ,
        "HOME": str(state),
        "MCP_CATALOG_PATH": str(state / "mcp.json"),
        "MCP_CLIENT_CONFIG_PATH": str(state / "client.json"),
    }
    # A generous connect timeout: a loaded machine can take over 15 s (the default) to start aat.
    argv = [str(INSPECTOR), "--cli", "--protocol-era", era, "--format", "json",
            "--connect-timeout", "60000", *args]  # fmt: skip
    done = subprocess.run(
        [*argv, *target.args], env=env, capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == exit_code, done.stderr[-4000:]
    printed: dict[str, Any] = json.loads(done.stdout)
    result: dict[str, Any] = printed["result"]
    return result


def call(
    tmp_path: Path, target: Target, era: str, tool: str, args: dict[str, Any], exit_code: int = 0
) -> dict[str, Any]:
    """tools/call through the Inspector; the result, with its text and structured JSON equal."""
    result = inspect(
        tmp_path,
        target,
        era,
        *("--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(args)),
        exit_code=exit_code,
    )
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    # A modern-era answer names the server in _meta; a legacy one (after initialize) does not.
    meta = result.get("_meta", {})
    assert ("io.modelcontextprotocol/serverInfo" in meta) == (era == "modern"), meta
    return result


def test_tools_list_shows_the_seven_tools(
    tmp_path: Path, target: Target, protocol_era: str
) -> None:
    listed = inspect(tmp_path, target, protocol_era, "--method", "tools/list")
    assert [tool["name"] for tool in listed["tools"]] == TOOLS
    run_tool = next(tool for tool in listed["tools"] if tool["name"] == "run_tool")
    assert run_tool["inputSchema"]["required"] == ["tool"]


def test_capabilities_with_no_arguments_is_the_compact_list(
    tmp_path: Path, target: Target, protocol_era: str
) -> None:
    result = call(tmp_path, target, protocol_era, "capabilities", {})
    assert result["isError"] is False
    listing = result["structuredContent"]
    assert [t["name"] for t in listing["tools"]] == ["hello-world", "outbox", "xlsx"]
    assert [a["name"] for a in listing["agents"]] == ["summarize"]
    assert [s["name"] for s in listing["skills"]] == ["approvals"]
    # Compact: a name, a description, an action count and readiness; no schemas.
    assert all(set(t) == {"name", "description", "actions", "ready"} for t in listing["tools"])
    assert {t["name"]: t["actions"] for t in listing["tools"]}["hello-world"] == 1


def test_run_tool_greets_and_records_a_job(
    tmp_path: Path, target: Target, protocol_era: str
) -> None:
    greet = {"tool": "hello-world", "action": "greet", "args": {"name": "Ada"}}
    result = call(tmp_path, target, protocol_era, "run_tool", greet)
    assert result["isError"] is False
    ran = result["structuredContent"]
    assert ran["status"] == "succeeded"
    assert ran["result"] == {"greeting": "Hello, Ada!"}

    engine = make_engine(Settings(home=target.home))
    try:
        with Session(engine) as session:
            job = session.get(Job, ran["job"])
            assert job is not None
            assert (job.name, job.state, job.surface) == (
                "hello-world",
                JobState.succeeded,
                target.surface,
            )
    finally:
        engine.dispose()


def test_unknown_tool_is_an_error_result_with_did_you_mean(
    tmp_path: Path, target: Target, protocol_era: str
) -> None:
    typo = {"tool": "hello-wrld", "action": "greet", "args": {"name": "Ada"}}
    result = call(tmp_path, target, protocol_era, "run_tool", typo, exit_code=TOOL_ERROR_EXIT)
    assert result["isError"] is True
    answer = result["structuredContent"]
    assert answer["status"] == "invalid"
    assert answer["did_you_mean"] == ["hello-world"]
    assert "hello-wrld" in answer["error"]


def cli_target(tmp_path: Path) -> Target:
    """`aat mcp` started by the Inspector, holding a confirmed call for only 1 s."""
    home = tmp_path / "aat-home"
    return Target(
        args=["-e", f"AAT_HOME={home}", "-e", "AAT_APPROVAL_WAIT_S=1", str(AAT), "mcp"],
        home=home,
        surface=Surface.mcp_stdio,
    )


SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "cli", "body": "hi"},
}


def test_confirmed_call_from_the_legacy_cli_is_held_then_pending(tmp_path: Path) -> None:
    # The Inspector CLI declares no elicitation (it has no one to show a link to), and the
    # Tasks extension cannot be used on the handshake era, so it gets the ordinary
    # hold-then-pending answer, never an elicitation.
    result = call(tmp_path, cli_target(tmp_path), "legacy", "run_tool_confirmed", SEND)
    answer = result["structuredContent"]
    assert result["isError"] is False
    assert answer["status"] == "pending_approval"
    assert answer["approval_url"].endswith(f"/jobs/{answer['job']}")


def test_modern_cli_follows_the_task_until_the_operator_decides(tmp_path: Path) -> None:
    # In the modern era the Inspector declares the Tasks extension on every request: the
    # confirmed call becomes a task, which the CLI polls past the 1 s hold until an
    # operator decides, then prints the call's result.
    target = cli_target(tmp_path)
    decided: list[int] = []

    def operator_denies() -> None:
        platform = Platform(Settings(home=target.home))
        try:
            deadline = time.monotonic() + 60
            while not (waiting := pending_for(platform=platform)):
                assert time.monotonic() < deadline, "the call was never queued"
                time.sleep(0.2)
            time.sleep(2)  # longer than the bridge would hold an ordinary call
            job_id = int(waiting[0]["job"])
            decisions.deny(
                platform=platform, job_id=job_id, operator="olga", reason="no", address=None
            )
            decided.append(job_id)
        finally:
            platform.engine.dispose()

    thread = threading.Thread(target=operator_denies, daemon=True)
    thread.start()
    # The result is the task's (the serverInfo stamp is on the tasks/get answer around it).
    result = inspect(
        tmp_path,
        target,
        "modern",
        *("--method", "tools/call", "--tool-name", "run_tool_confirmed"),
        *("--tool-args-json", json.dumps(SEND)),
        exit_code=TOOL_ERROR_EXIT,
    )
    thread.join(timeout=30)
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    answer = result["structuredContent"]
    assert decided == [answer["job"]]
    assert (answer["status"], answer["reason"], answer["decided_by"]) == ("denied", "no", "olga")
