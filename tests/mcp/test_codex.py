"""Codex CLI (`codex exec`, from npm in tests/mcp/node) as a real MCP client of aat.

The user's ~/.codex/config.toml is a model provider plus `aat config codex` as printed (its
`default_tools_approval_mode = "approve"` lets `codex exec`, which never asks, send the calls
aat's operator decides). The provider is a scripted Responses API endpoint on
127.0.0.1 (SSE), so a `codex exec` turn is deterministic; `aat serve` runs on the user's
default aat home and the operator approves from the test.

Codex declares URL elicitation but declines every elicitation within milliseconds (nobody
saw it). aat takes a decline that fast as a client that cannot show the page and holds the
call as for a client without elicitation; where the hold runs out the model polls
`job_status`. Codex cuts a tool call after its `tool_timeout_sec` (default 60 s, not
extended by progress), so aat's wait must end first."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from agent_seat import (
    NODE_BIN,
    POLL,
    RUN,
    AgentTurn,
    Operator,
    QuietHandler,
    ScriptedModel,
    Seat,
    ToolResult,
    aat_config,
    jobs_of,
    make_seat,
    outbox_messages,
    serving,
)
from browser_sign_in import Printing, aat_sign_in_config, add_operator, allow_sign_in, mcp_status

from webplatform.config import Settings
from webplatform.store.models import JobState

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CODEX = NODE_BIN / "codex"
API_KEY_ENV = "SCRIPTED_API_KEY"
PROMPT = "Send the weekly report to ops@example.org with the aat outbox tool."
AGENT = "codex-laptop"


class ResponsesHandler(QuietHandler):
    """`POST /v1/responses`: the turn's next move as a streamed Responses API response."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        if not self.path.endswith("/responses"):
            self.send_error(404)
            return
        request = self.read_json()
        item = next_item(self.server.turn, request, serial=len(self.server.requests))
        response = {"id": f"resp_{len(self.server.requests)}"}
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        events = [
            {"type": "response.created", "response": response},
            {"type": "response.output_item.done", "item": item},
            {"type": "response.completed", "response": {**response, "usage": usage}},
        ]
        self.send_events(events, named=True)


def next_item(turn: AgentTurn, request: dict[str, Any], *, serial: int) -> dict[str, Any]:
    """The output item for one request: a call into aat's tool namespace, or a message."""
    namespace = aat_namespace(request)
    if namespace is None:
        return message(f"aat's tools were not offered: {offered(request)}", serial)
    move = turn.step(tool_results(request))
    if isinstance(move, str):
        return message(move, serial)
    tool, arguments = move
    return {
        "type": "function_call",
        "id": f"fc_{serial}",
        "call_id": f"call_{serial}",
        "namespace": namespace,
        "name": tool,
        "arguments": json.dumps(arguments),
    }


def aat_namespace(request: dict[str, Any]) -> str | None:
    """The name Codex gives aat's tools as one namespace (`mcp__aat`), if offered."""
    for tool in request.get("tools", []):
        if tool.get("type") == "namespace" and any(
            t.get("name") == RUN for t in tool.get("tools", [])
        ):
            return str(tool["name"])
    return None


def offered(request: dict[str, Any]) -> list[str]:
    return [str(t.get("name") or t.get("type")) for t in request.get("tools", [])]


def tool_results(request: dict[str, Any]) -> list[ToolResult]:
    """(tool, output text) for every function call Codex sent back a result for, in order."""
    names = {i["call_id"]: i["name"] for i in request["input"] if i.get("type") == "function_call"}
    results: list[ToolResult] = []
    for item in request["input"]:
        if item.get("type") == "function_call_output":
            output = item["output"]
            if isinstance(output, list):  # content items: Codex's own notes, then the text
                output = "\n".join(str(part.get("text", "")) for part in output)
            results.append((names.get(item["call_id"], "?"), str(output)))
    return results


def message(text: str, serial: int) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{serial}",
        "content": [{"type": "output_text", "text": text}],
    }


def write_codex_config(seat: Seat, model: ScriptedModel, *, aat_block: str | None = None) -> Path:
    """~/.codex/config.toml: the scripted provider, then the table `aat config codex` prints
    (or `aat_block`, another one it prints)."""
    codex_home = seat.home / ".codex"
    codex_home.mkdir(exist_ok=True)
    provider = (
        # Signed-in servers' tokens in a file: this machine has no keyring for Codex to use.
        'mcp_oauth_credentials_store = "file"\n'
        'model = "scripted-turn"\n'
        'model_provider = "scripted"\n\n'
        "[model_providers.scripted]\n"
        'name = "Scripted Responses endpoint"\n'
        f'base_url = "{model.origin}/v1"\n'
        f'env_key = "{API_KEY_ENV}"\n'
        'wire_api = "responses"\n\n'
    )
    (codex_home / "config.toml").write_text(provider + (aat_block or aat_config("codex")))
    return codex_home


def codex_exec(
    seat: Seat, model: ScriptedModel, *, aat_block: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`codex exec PROMPT` in the project folder, with the user's config and default flags."""
    codex_home = write_codex_config(seat, model, aat_block=aat_block)
    env = {**seat.env, "CODEX_HOME": str(codex_home), API_KEY_ENV: "not-a-secret"}
    return subprocess.run(
        # The project folder is not a git repository; Codex refuses one unless told.
        [str(CODEX), "exec", "--skip-git-repo-check", PROMPT],
        cwd=seat.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def seat(tmp_path: Path) -> Seat:
    return make_seat(tmp_path)


def ran(done: subprocess.CompletedProcess[str]) -> str:
    """What to show when a run went wrong: the end of Codex's output."""
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def assert_one_message_sent(seat: Seat) -> None:
    """Exactly one job, succeeded, and exactly one message in the outbox."""
    assert [(j.name, j.action, j.state) for j in jobs_of(seat)] == [
        ("outbox", "send-message", JobState.succeeded)
    ]
    messages = outbox_messages(seat)
    assert [m["subject"] for m in messages] == ["weekly report"], messages


def test_codex_exec_holds_the_call_until_the_operator_approves(seat: Seat, tmp_path: Path) -> None:
    turn = AgentTurn()
    with (
        ScriptedModel(ResponsesHandler, turn) as model,
        serving(seat, tmp_path / "serve.log"),
        Operator(seat, delay_s=3.0) as operator,
    ):
        done = codex_exec(seat, model)
    assert done.returncode == 0, ran(done)
    [answer] = turn.answers(RUN)
    assert answer["status"] == "succeeded", answer
    assert operator.error is None, operator.error
    assert answer["result"]["sent"] is True
    assert turn.answers(POLL) == [], "the held call needed no polling"
    assert operator.approved_at is not None and turn.seen[0].at > operator.approved_at
    assert "ended succeeded" in done.stdout, ran(done)
    assert_one_message_sent(seat)


def test_codex_exec_polls_job_status_when_the_wait_runs_out(seat: Seat, tmp_path: Path) -> None:
    turn = AgentTurn(poll_wait_s=20.0)
    with (
        ScriptedModel(ResponsesHandler, turn) as model,
        serving(seat, tmp_path / "serve.log", approval_wait_s=3.0),
        Operator(seat, delay_s=1.0, after=turn.polled) as operator,
    ):
        done = codex_exec(seat, model)
    assert done.returncode == 0, ran(done)
    [queued] = turn.answers(RUN)
    assert queued["status"] == "pending_approval", queued
    assert operator.error is None, operator.error
    assert queued["job"] == operator.job
    polled = turn.answers(POLL)
    assert polled and polled[-1]["status"] == "succeeded", polled
    assert all(p["job"] == operator.job for p in polled), polled
    assert_one_message_sent(seat)


def test_codex_tool_timeout_from_the_config_block_outlasts_the_approval_wait(
    seat: Seat, tmp_path: Path
) -> None:
    """With aat's default approval wait and the block's `tool_timeout_sec`, the call is held
    for the whole wait and the model then gets aat's own `pending_approval` (with the job id
    to poll), never Codex's timeout."""
    timeout_s = tomllib.loads(aat_config("codex"))["mcp_servers"]["aat"]["tool_timeout_sec"]
    wait_s = Settings.model_fields["approval_wait_s"].default
    assert wait_s < timeout_s, "aat's default wait must end before Codex cuts the call"
    turn = AgentTurn(poll_wait_s=10.0)
    with (
        ScriptedModel(ResponsesHandler, turn) as model,
        serving(seat, tmp_path / "serve.log"),
        Operator(seat, delay_s=1.0, after=turn.polled) as operator,
    ):
        done = codex_exec(seat, model)
    assert done.returncode == 0, ran(done)
    [queued] = turn.answers(RUN)
    assert queued["status"] == "pending_approval", queued
    assert operator.error is None, operator.error
    held_s = turn.seen[0].at - turn.called_at[0]
    assert wait_s - 1 < held_s < timeout_s, f"held {held_s:.1f} s"
    assert turn.answers(POLL)[-1]["status"] == "succeeded", turn.answers(POLL)
    assert_one_message_sent(seat)


@pytest.mark.timeout(240)  # a terminal UI, a browser, a model turn and an approval
def test_codex_signs_in_by_dynamic_registration_and_calls_as_that_agent(
    seat: Seat, tmp_path: Path
) -> None:
    """`codex mcp login aat --oauth-client-registration dcr` against a running `aat serve`
    (the block `aat config codex --url URL --sign-in` prints): Codex registers, prints the
    authorization URL (`--no-browser`), and takes the answer on its loopback listener; the
    operator allows it in the browser with her password. Codex then holds a token `/mcp`
    accepts, and `codex exec`'s call is queued under the agent's name, vouched by the token."""
    add_operator(seat)
    turn = AgentTurn()
    with (
        ScriptedModel(ResponsesHandler, turn) as model,
        serving(seat, tmp_path / "serve.log") as url,
    ):
        block = aat_sign_in_config(seat, "codex", f"{url}/mcp")
        codex_home = write_codex_config(seat, model, aat_block=block)
        env = {**seat.env, "CODEX_HOME": str(codex_home)}
        command = ["mcp", "login", "aat", "--oauth-client-registration", "dcr", "--no-browser"]
        with Printing([str(CODEX), *command], cwd=seat.project, env=env) as login:
            authorize_url = login.wait_for(rf"{re.escape(url)}/authorize\?\S+")
            allowed = allow_sign_in(url, authorize_url, AGENT)
            done = login.wait(timeout_s=60)
        listener = parse_qs(urlsplit(authorize_url).query)["redirect_uri"][0]
        assert listener.startswith("http://127.0.0.1:") and listener in allowed.page
        assert allowed.query["iss"] == [url]
        assert allowed.callback.status_code == 200, allowed.callback.text
        assert done == 0 and "Successfully logged in to MCP server 'aat'" in login.out, login.out
        [held] = json.loads((codex_home / ".credentials.json").read_text()).values()
        assert held["server_url"] == f"{url}/mcp" and held["issuer"] == url
        assert mcp_status(url, held["access_token"]) == 200
        with Operator(seat, delay_s=1.0) as operator:
            ran_exec = codex_exec(seat, model, aat_block=block)
    assert ran_exec.returncode == 0, ran(ran_exec)
    assert operator.error is None, operator.error
    assert turn.answers(RUN)[-1]["status"] == "succeeded", turn.answers(RUN)
    [job] = jobs_of(seat)
    assert (job.requested_by, job.requester_proof) == (AGENT, "token")
