"""opencode (from npm, tests/mcp/node) as a real MCP client of `aat mcp`.

The project config is what a user would paste: `aat config opencode` merged into an
opencode.json that also declares a model provider. The provider is a scripted
OpenAI-compatible chat endpoint in this process, so one `opencode run` agent turn is
deterministic: it calls `aat_run_tool`, and the test checks what came back.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from serving import aat_serve, free_port
from sqlmodel import Session, select

from webplatform.config import Settings
from webplatform.store import make_engine
from webplatform.store.models import Job, JobState, Surface

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OPENCODE = Path(__file__).parent / "node" / "node_modules" / ".bin" / "opencode"
MODEL = "scripted/turn"
GREET_CALL = {"tool": "hello-world", "action": "greet", "args": {"name": "Ada"}}
TOOLS = {
    "capabilities",
    "run_tool",
    "run_agent",
    "run_tool_confirmed",
    "run_agent_confirmed",
    "get_skill",
    "job_status",
}


class ChatScript(ThreadingHTTPServer):
    """An OpenAI-compatible /v1/chat/completions that plays one tool-using turn.

    A request offering `aat_run_tool` and carrying no tool result yet gets a call to it; a
    request carrying the tool result gets a final text echoing that result; anything else
    (opencode asks the model for a session title) gets a short text. Every request is kept.
    """

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.requests: list[dict[str, Any]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def tool_results(self) -> list[str]:
        """The content of every tool-result message opencode sent back."""
        return [
            str(m.get("content"))
            for r in self.requests
            for m in r.get("messages", [])
            if m.get("role") == "tool"
        ]

    def reply(self, request: dict[str, Any]) -> dict[str, Any]:
        """The assistant message (content and/or tool_calls) for one chat request."""
        self.requests.append(request)
        offered = {t["function"]["name"] for t in request.get("tools", [])}
        results = [m for m in request.get("messages", []) if m.get("role") == "tool"]
        if results:
            return {"content": f"The tool said: {results[-1]['content']}"}
        if "aat_run_tool" in offered:
            call = {
                "id": "call_greet",
                "type": "function",
                "function": {"name": "aat_run_tool", "arguments": json.dumps(GREET_CALL)},
            }
            return {"content": None, "tool_calls": [call]}
        return {"content": "Greeting Ada"}


class ChatHandler(BaseHTTPRequestHandler):
    """Answers each chat request with the script's reply, streamed as opencode asks for."""

    server: ChatScript

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not request.get("stream"):
            # opencode always streams; a plain request means this script is out of date.
            self.send_error(400, "this scripted endpoint only streams")
            return
        message = self.server.reply(request)
        delta = {"role": "assistant", **message}
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
        finish = "tool_calls" if "tool_calls" in message else "stop"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for choice in (
            {"delta": delta, "finish_reason": None},
            {"delta": {}, "finish_reason": finish},
        ):
            self.wfile.write(f"data: {json.dumps(chunk(choice))}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002, ARG002
        """Quiet: the test reports what matters."""


def chunk(choice: dict[str, Any]) -> dict[str, Any]:
    """One streamed OpenAI chat-completion chunk with one choice and token usage."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "turn",
        "choices": [{"index": 0, **choice}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@pytest.fixture
def chat() -> Iterator[ChatScript]:
    """The scripted chat endpoint, serving in a thread."""
    server = ChatScript()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def aat_config_opencode(env: dict[str, str]) -> dict[str, Any]:
    """What `aat config opencode` prints, parsed."""
    out = subprocess.run(
        [sys.executable, "-m", "webplatform", "config", "opencode"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    config: dict[str, Any] = json.loads(out.stdout)
    return config


@pytest.fixture
def offline_env(tmp_path: Path) -> dict[str, str]:
    """opencode's environment: HOME and XDG dirs in tmp_path, nothing fetched from the network."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AAT_", "OPENCODE_", "XDG_"))}
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            # opencode passes its environment on to `aat mcp`, so the bridge uses this home.
            "AAT_HOME": str(tmp_path / "aat-home"),
            # The model catalogue comes from models.opencode.ai; the provider below needs none.
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE": "1",
            # opencode installs @opencode-ai/plugin into its config dirs in the background
            # (needed only by plugins, none here); a dead registry keeps that off the network.
            "npm_config_registry": "http://127.0.0.1:9/",
        }
    )
    return env


@pytest.fixture
def project(tmp_path: Path, offline_env: dict[str, str], chat: ChatScript) -> Path:
    """A project dir whose opencode.json is `aat config opencode` plus the scripted provider."""
    folder = tmp_path / "project"
    folder.mkdir()
    config = aat_config_opencode(offline_env)
    config.update(
        {
            "$schema": "https://opencode.ai/config.json",
            "model": MODEL,
            "small_model": MODEL,
            "provider": {
                "scripted": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Scripted chat endpoint",
                    "options": {"baseURL": chat.base_url, "apiKey": "not-a-secret"},
                    "models": {"turn": {"name": "One scripted turn", "tool_call": True}},
                }
            },
        }
    )
    (folder / "opencode.json").write_text(json.dumps(config, indent=2))
    return folder


def aat_config_opencode_url(env: dict[str, str], url: str) -> dict[str, Any]:
    """What `aat config opencode --url URL` prints, parsed."""
    out = subprocess.run(
        [sys.executable, "-m", "webplatform", "config", "opencode", "--url", url],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    config: dict[str, Any] = json.loads(out.stdout)
    return config


def opencode(
    args: list[str], *, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run the opencode CLI from tests/mcp/node in `cwd`, with a bounded wait."""
    return subprocess.run(
        [str(OPENCODE), *args],
        cwd=cwd,
        # opencode takes its project directory from PWD, which a shell started there would set.
        env={**env, "PWD": str(cwd)},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_opencode_mcp_list_shows_the_bridge_connected(
    project: Path, offline_env: dict[str, str]
) -> None:
    done = opencode(["mcp", "list"], cwd=project, env=offline_env)
    assert done.returncode == 0, done.stderr
    listing = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)
    command = json.loads((project / "opencode.json").read_text())["mcp"]["aat"]["command"]
    assert re.search(r"✓ aat\s+connected", listing), listing
    assert " ".join(command) in listing
    assert "1 server(s)" in listing


def test_opencode_run_calls_aat_run_tool_and_gets_the_greeting(
    project: Path, offline_env: dict[str, str], chat: ChatScript
) -> None:
    done = opencode(
        ["run", "--format", "json", "Greet Ada with the aat hello-world tool."],
        cwd=project,
        env=offline_env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    # What the model was offered: the seven bridge tools, under opencode's `aat_` prefix.
    offered = {t["function"]["name"] for r in chat.requests for t in r.get("tools", [])}
    assert {n for n in offered if n.startswith("aat_")} == {f"aat_{n}" for n in TOOLS}

    # opencode called the tool as scripted and sent its result back to the model.
    [used] = [e["part"] for e in events if e["type"] == "tool_use"]
    assert used["tool"] == "aat_run_tool"
    assert used["state"]["status"] == "completed"
    assert used["state"]["input"] == GREET_CALL
    [result] = chat.tool_results()
    assert json.loads(result) == json.loads(used["state"]["output"])
    assert json.loads(result)["status"] == "succeeded"
    assert json.loads(result)["result"] == {"greeting": "Hello, Ada!"}
    texts = [e["part"]["text"] for e in events if e["type"] == "text"]
    assert any("Hello, Ada!" in t for t in texts), texts

    # The run went through aat like any other: one job, from the stdio bridge.
    engine = make_engine(Settings(home=Path(offline_env["AAT_HOME"])))
    try:
        with Session(engine) as session:
            jobs = session.exec(select(Job)).all()
    finally:
        engine.dispose()
    assert [(j.name, j.action, j.state, j.surface) for j in jobs] == [
        ("hello-world", "greet", JobState.succeeded, Surface.mcp_stdio)
    ]


def test_opencode_mcp_list_connects_through_url_with_the_token_from_the_environment(
    tmp_path: Path, offline_env: dict[str, str]
) -> None:
    """`aat config opencode --url` pasted as is: opencode reaches a running `aat serve` with
    AAT_AGENT_TOKEN from its environment, and is refused without it."""
    server_env = {**offline_env, "AAT_HOME": str(tmp_path / "server-home")}
    minted = subprocess.run(
        [sys.executable, "-m", "webplatform", "agent", "add", "opencode-bot"],
        env=server_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    with aat_serve(env=server_env, port=free_port(), log=tmp_path / "serve.log") as base:
        folder = tmp_path / "remote-project"
        folder.mkdir()
        config = aat_config_opencode_url(offline_env, f"{base}/mcp")
        config["$schema"] = "https://opencode.ai/config.json"
        (folder / "opencode.json").write_text(json.dumps(config, indent=2))
        assert token not in (folder / "opencode.json").read_text()
        # The client's side has no AAT_HOME to read: everything comes from the server.
        client_env = {k: v for k, v in offline_env.items() if k != "AAT_HOME"}

        done = opencode(["mcp", "list"], cwd=folder, env={**client_env, "AAT_AGENT_TOKEN": token})
        assert done.returncode == 0, done.stderr
        listing = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)
        assert re.search(r"✓ aat\s+connected", listing), listing
        assert f"{base}/mcp" in listing

        refused = opencode(["mcp", "list"], cwd=folder, env=client_env)
        listing = re.sub(r"\x1b\[[0-9;]*m", "", refused.stdout + refused.stderr)
        assert re.search(r"✗ aat\s+failed", listing) and "(401)" in listing, listing
