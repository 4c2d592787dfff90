"""Gemini CLI (`gemini -p --yolo`, from npm in tests/mcp/node) as a real MCP client of aat.

The user's ~/.gemini/settings.json is `aat config gemini` plus the API-key auth choice; the
model is a scripted Gemini API endpoint on 127.0.0.1 (`GOOGLE_GEMINI_BASE_URL`):
`streamGenerateContent?alt=sse` plays the agent turn, and the JSON `generateContent` calls the
CLI makes for itself (its model router) get answers that fit their schema. `aat serve` runs
on the user's default aat home and the operator approves from the test.

Gemini CLI declares no elicitation, so aat holds a queued call until the decision. It adds a
`wait_for_previous` boolean to every tool's schema and forwards it when the model sets it; the
scripted model sets it on every call, as a real model filling the field would.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

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
from browser_sign_in import Terminal, aat_sign_in_config, add_operator, allow_sign_in, mcp_status

from webplatform.store.models import JobState

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GEMINI = NODE_BIN / "gemini"
PROMPT = "Send the weekly report to ops@example.org with the aat outbox tool."
# What Gemini CLI adds to every tool's schema; a model that fills it sends it along.
GEMINI_ADDS = {"wait_for_previous": True}
AGENT = "gemini-laptop"
READING_S = 1.0  # how long a person reads a dialog before answering it
USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


class GeminiHandler(QuietHandler):
    """`POST /v1beta/models/MODEL:{streamGenerateContent,generateContent,countTokens}`."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        method = self.path.split("?")[0].rsplit(":", 1)[-1]
        request = self.read_json()
        if method == "countTokens":
            self.send_json({"totalTokens": 10})
        elif method == "generateContent":
            self.send_json(candidate([{"text": json.dumps(fitting(schema_of(request)))}]))
        elif method == "streamGenerateContent":
            part = next_part(self.server.turn, request)
            self.send_events([candidate([part])], named=False)
        else:
            self.send_error(404)


def candidate(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One complete model answer in the Gemini API's shape."""
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": USAGE,
    }


def schema_of(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema a `generateContent` call asks the answer to fit (the CLI's router)."""
    config = request.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    assert isinstance(schema, dict), f"a JSON call without a schema: {json.dumps(request)[:500]}"
    return schema


def fitting(schema: dict[str, Any]) -> dict[str, Any]:
    """The plainest object with every required property: first enum value, 1, false, text."""
    plain = {"integer": 1, "number": 1, "boolean": False}
    answer: dict[str, Any] = {}
    for name in schema.get("required", []):
        prop = schema["properties"][name]
        kind = str(prop.get("type", "string")).lower()
        answer[name] = prop["enum"][0] if "enum" in prop else plain.get(kind, "scripted")
    return answer


def next_part(turn: AgentTurn, request: dict[str, Any]) -> dict[str, Any]:
    """The turn's next move as one part: a function call by the CLI's name, or text."""
    declared = [
        f["name"] for t in request.get("tools", []) for f in t.get("functionDeclarations", [])
    ]
    move = turn.step(tool_results(request))
    if isinstance(move, str):
        return {"text": move}
    tool, args = move
    names = [d for d in declared if d.endswith(f"_{tool}") or d == tool]
    if not names:
        return {"text": f"aat's {tool} was not offered: {declared}"}
    return {"functionCall": {"name": names[0], "args": args}}


def tool_results(request: dict[str, Any]) -> list[ToolResult]:
    """(tool, output text) per function response in the conversation; a call the CLI
    reported as failed becomes an answer carrying the CLI's error text."""
    results: list[ToolResult] = []
    for content in request.get("contents", []):
        for part in content.get("parts", []):
            if "functionResponse" not in part:
                continue
            name = part["functionResponse"]["name"]
            tool = next((t for t in (RUN, POLL) if name.endswith(t)), name)
            response = part["functionResponse"]["response"]
            if "error" in response:
                results.append((tool, {"status": None, "client_error": response["error"]}))
            else:
                results.append((tool, str(response.get("output"))))
    return results


def write_gemini_settings(seat: Seat, aat_block: str | None = None) -> None:
    """~/.gemini/settings.json: `aat config gemini` (or `aat_block`, another block it prints)
    plus what a first interactive run would have asked (API-key auth, trusting the project
    folder), and no usage statistics (there is no network to send them to)."""
    settings = {
        **json.loads(aat_block or aat_config("gemini")),
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
    }
    folder = seat.home / ".gemini"
    folder.mkdir(exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings, indent=2))
    trusted = {str(seat.project): "TRUST_FOLDER"}
    (folder / "trustedFolders.json").write_text(json.dumps(trusted, indent=2))


def gemini_p(seat: Seat, model: ScriptedModel) -> subprocess.CompletedProcess[str]:
    """`gemini -p PROMPT --yolo` in the project folder against the scripted endpoint."""
    write_gemini_settings(seat)
    env = {
        **seat.env,
        "GEMINI_API_KEY": "not-a-secret",
        "GOOGLE_GEMINI_BASE_URL": model.origin,
    }
    return subprocess.run(
        [str(GEMINI), "-p", PROMPT, "--yolo"],
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
    """What to show when a run went wrong: the end of the CLI's output."""
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def assert_one_message_sent(seat: Seat) -> None:
    """Exactly one job, succeeded, and exactly one message in the outbox."""
    assert [(j.name, j.action, j.state) for j in jobs_of(seat)] == [
        ("outbox", "send-message", JobState.succeeded)
    ]
    messages = outbox_messages(seat)
    assert [m["subject"] for m in messages] == ["weekly report"], messages


def test_gemini_holds_the_call_that_sets_wait_for_previous_until_approval(
    seat: Seat, tmp_path: Path
) -> None:
    turn = AgentTurn(extra=GEMINI_ADDS)
    with (
        ScriptedModel(GeminiHandler, turn) as model,
        serving(seat, tmp_path / "serve.log"),
        Operator(seat, delay_s=3.0) as operator,
    ):
        done = gemini_p(seat, model)
    assert done.returncode == 0, ran(done)
    [answer] = turn.answers(RUN)
    assert answer["status"] == "succeeded", answer
    assert operator.error is None, operator.error
    assert answer["result"]["sent"] is True
    assert turn.answers(POLL) == [], "the held call needed no polling"
    assert operator.approved_at is not None and turn.seen[0].at > operator.approved_at
    assert "ended succeeded" in done.stdout, ran(done)
    assert_one_message_sent(seat)


def test_gemini_polls_job_status_with_wait_for_previous_when_the_wait_runs_out(
    seat: Seat, tmp_path: Path
) -> None:
    turn = AgentTurn(poll_wait_s=20.0, extra=GEMINI_ADDS)
    with (
        ScriptedModel(GeminiHandler, turn) as model,
        serving(seat, tmp_path / "serve.log", approval_wait_s=3.0),
        Operator(seat, delay_s=1.0, after=turn.polled) as operator,
    ):
        done = gemini_p(seat, model)
    assert done.returncode == 0, ran(done)
    [queued] = turn.answers(RUN)
    assert queued["status"] == "pending_approval", queued
    assert operator.error is None, operator.error
    polled = turn.answers(POLL)
    assert polled and polled[-1]["status"] == "succeeded", polled
    assert all(p["job"] == operator.job for p in polled), polled
    assert_one_message_sent(seat)


def fake_browser(tmp_path: Path) -> tuple[Path, Path]:
    """A folder with an `xdg-open` (what Gemini CLI runs to open a page on Linux) that only
    writes the URL down, and the file it writes: the test is the browser."""
    folder, opened = tmp_path / "browser", tmp_path / "opened-urls.txt"
    folder.mkdir()
    script = folder / "xdg-open"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{opened}"\n')
    script.chmod(0o755)
    return folder, opened


def opened_url(opened: Path, screen: Terminal, timeout_s: float = 30) -> str:
    """The URL Gemini CLI asked the browser to open, once it did."""
    deadline = time.monotonic() + timeout_s
    while not (opened.exists() and opened.read_text().strip()):
        assert time.monotonic() < deadline, f"no page was opened:\n{screen.text()}"
        time.sleep(0.1)
    return opened.read_text().split()[0]


@pytest.mark.timeout(240)  # a terminal UI, a browser, a model turn and an approval
def test_gemini_signs_in_with_mcp_auth_in_its_terminal_ui_and_calls_as_that_agent(
    seat: Seat, tmp_path: Path
) -> None:
    """Gemini CLI's terminal UI (in tmux) with the block `aat config gemini --url URL
    --sign-in` prints: `/mcp auth aat` registers, asks the user, opens the authorization page,
    and the operator allows it in the browser with her password. Gemini CLI checks the
    answer's `iss` against the issuer it discovered (RFC 9207: it refuses an answer without
    one), gets its token and reconnects with it; a prompt's call is then queued under the
    agent's name, vouched by the token, and the model sees it succeed."""
    add_operator(seat)
    turn = AgentTurn(extra=GEMINI_ADDS)
    browser, opened = fake_browser(tmp_path)
    with (
        ScriptedModel(GeminiHandler, turn) as model,
        serving(seat, tmp_path / "serve.log") as url,
    ):
        write_gemini_settings(seat, aat_sign_in_config(seat, "gemini", f"{url}/mcp"))
        env = {**seat.env, "GEMINI_API_KEY": "not-a-secret", "GOOGLE_GEMINI_BASE_URL": model.origin}
        env["PATH"] = f"{browser}:{env['PATH']}"
        screen = Terminal([str(GEMINI), "--yolo"], cwd=seat.project, env=env)
        try:
            screen.wait_for("Type your message")
            screen.submit("/mcp auth aat", started="Do you want to continue?")
            time.sleep(READING_S)
            screen.tmux("send-keys", "Enter")  # "1. Yes" is selected
            allowed = allow_sign_in(url, opened_url(opened, screen), AGENT)
            assert allowed.query["iss"] == [url]
            assert "Authentication Successful" in allowed.callback.text, allowed.callback.text
            screen.wait_for("Successfully authenticated and reloaded tools for 'aat'")
            [held] = json.loads((seat.home / ".gemini" / "mcp-oauth-tokens.json").read_text())
            assert mcp_status(url, held["token"]["accessToken"]) == 200
            with Operator(seat, delay_s=1.0) as operator:
                screen.type(PROMPT)
                screen.wait_for("The send-message job ended succeeded", timeout_s=120)
        finally:
            print(f"--- Gemini CLI's last screen ---\n{screen.text()}")
            screen.close()
    assert operator.error is None, operator.error
    [job] = jobs_of(seat)
    assert (job.requested_by, job.requester_proof) == (AGENT, "token")
    assert_one_message_sent(seat)
