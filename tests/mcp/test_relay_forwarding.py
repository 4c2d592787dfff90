"""`aat mcp --url` forwards what the server says, as it says it: a real `aat serve` process and
the relay process, driven line by line over its pipes (and by the SDK client for elicitation).

Both protocol eras: a legacy session (`initialize`, `Mcp-Session-Id`, its notification stream,
a DELETE at the end) and sessionless requests (2026-07-28, the version in each `_meta`).
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_helpers import ERAS, body
from serving import aat_env, aat_serve, free_port
from test_native_waiting import PERSON_S, SEND, Elicitations

pytestmark = [pytest.mark.anyio, pytest.mark.integration]  # starts aat processes

AAT = [sys.executable, "-m", "webplatform"]
APPROVAL_WAIT_S = 4.0
LEGACY = "legacy"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "pipes", "version": "1"},
}
INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "pipes", "version": "1"},
}
HELLO = {"name": "run_tool", "arguments": {"tool": "hello-world", "args": {"name": "Ada"}}}
HELD = {"name": "run_tool_confirmed", "arguments": SEND}


class Served:
    """A running `aat serve`: its /mcp URL, an agent token for it, and its log."""

    def __init__(self, url: str, token: str, log: Path) -> None:
        self.url = url
        self.token = token
        self.log = log


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One `aat serve` for the module, with an agent token and a short approval wait."""
    root = tmp_path_factory.mktemp("relay-forwarding")
    env = aat_env(AAT_HOME=str(root / "home"), AAT_APPROVAL_WAIT_S=str(APPROVAL_WAIT_S))
    minted = subprocess.run(
        [*AAT, "agent", "add", "pipes"], env=env, capture_output=True, text=True, timeout=60
    )
    assert minted.returncode == 0, minted.stderr
    log = root / "serve.log"
    with aat_serve(env=env, port=free_port(), log=log) as base:
        yield Served(f"{base}/mcp", minted.stdout.strip(), log)


class Pipes:
    """`aat mcp --url` started by hand: JSON-RPC lines in, lines out as they come."""

    def __init__(self, served: Served, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [*AAT, "mcp", "--url", served.url],
            env=aat_env(AAT_AGENT_TOKEN=served.token, HOME=str(cwd)),
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def send(self, *messages: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        for message in messages:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def until(self, id_: int, timeout_s: float = 30) -> list[dict[str, Any]]:
        """Every message written up to and including the answer to request `id_`."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        while True:
            message = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert message is not None, f"the relay ended before answering {id_}: {seen}"
            seen.append(message)
            if message.get("id") == id_ and "method" not in message:
                return seen

    def finish(self, timeout_s: float = 30) -> tuple[int, list[dict[str, Any]]]:
        """Close the client's input; (exit code, every message written after that)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=timeout_s)
        rest: list[dict[str, Any]] = []
        while (message := self.lines.get(timeout=5)) is not None:
            rest.append(message)
        return code, rest


@pytest.fixture
def pipes(served: Served, tmp_path: Path) -> Iterator[Pipes]:
    relay = Pipes(served, tmp_path)
    yield relay
    if relay.proc.poll() is None:
        relay.proc.kill()
        relay.proc.wait()


def request(era: str, id_: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request of `era`: sessionless ones carry the protocol fields in `_meta`."""
    if era != LEGACY:
        params = {**params, "_meta": {**params.get("_meta", {}), **MODERN_META}}
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def handshake(era: str) -> list[dict[str, Any]]:
    """What a client of `era` writes first: `initialize` and `initialized`, or nothing."""
    if era != LEGACY:
        return []
    return [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]


def answer_of(message: dict[str, Any]) -> dict[str, Any]:
    """The aat answer inside a `tools/call` response."""
    result = message["result"]
    assert isinstance(result, dict) and "structuredContent" in result, message
    return dict(result["structuredContent"])


@pytest.mark.parametrize("era", ERAS)
def test_a_held_call_streams_its_progress_before_its_answer(pipes: Pipes, era: str) -> None:
    pipes.send(*handshake(era))
    held = {**HELD, "_meta": {"progressToken": "p1"}}
    pipes.send(request(era, 1, "tools/call", held))
    seen = pipes.until(1)
    progress = [m for m in seen if m.get("method") == "notifications/progress"]
    assert progress and all(m["params"]["progressToken"] == "p1" for m in progress), seen
    assert seen.index(progress[0]) < len(seen) - 1  # before the answer, as they came
    assert answer_of(seen[-1])["status"] == "pending_approval"


@pytest.mark.parametrize("era", ERAS)
def test_a_held_call_does_not_hold_up_job_status(pipes: Pipes, era: str) -> None:
    pipes.send(*handshake(era), request(era, 1, "tools/call", HELLO))
    job = answer_of(pipes.until(1)[-1])["job"]
    started = time.monotonic()
    pipes.send(request(era, 2, "tools/call", HELD))
    pipes.send(request(era, 3, "tools/call", {"name": "job_status", "arguments": {"job": job}}))
    first = [m for m in pipes.until(3) if "method" not in m]
    assert [m["id"] for m in first] == [3], "job_status waited for the held call"
    assert time.monotonic() - started < APPROVAL_WAIT_S
    assert answer_of(first[0])["status"] == "succeeded"
    assert answer_of(pipes.until(2)[-1])["status"] == "pending_approval"


@pytest.mark.parametrize("era", ERAS)
def test_every_request_read_before_the_end_of_input_is_answered(pipes: Pipes, era: str) -> None:
    # As `printf '...' | aat mcp` does: everything at once, then the end of input, without
    # waiting for any answer (not even initialize's).
    pipes.send(
        *handshake(era),
        request(era, 1, "tools/call", HELD),
        request(era, 2, "tools/call", HELLO),
    )
    code, written = pipes.finish()
    answers = {m["id"]: answer_of(m) for m in written if "method" not in m and m.get("id")}
    assert code == 0
    assert answers[1]["status"] == "pending_approval" and answers[2]["status"] == "succeeded"


@pytest.mark.parametrize("mode", ERAS)
async def test_an_elicitation_reaches_the_client_and_its_answer_the_server(
    served: Served, tmp_path: Path, mode: str
) -> None:
    params = StdioServerParameters(
        command=AAT[0],
        args=[*AAT[1:], "mcp", "--url", served.url],
        env=aat_env(AAT_AGENT_TOKEN=served.token, HOME=str(tmp_path)),
    )
    declined = Elicitations("decline", after_s=PERSON_S)  # a person's decline withdraws
    async with Client(params, mode=mode, elicitation_callback=declined) as client:
        with anyio.fail_after(30):
            result = await client.call_tool("run_tool_confirmed", SEND)
    answer = body(result)
    assert len(declined.asked) == 1 and declined.asked[0].url.endswith(f"/jobs/{answer['job']}")
    assert answer["status"] == "denied" and "declined" in answer["reason"], answer


def test_a_legacy_session_gets_its_notification_stream_and_a_delete(
    pipes: Pipes, served: Served
) -> None:
    pipes.send(*handshake(LEGACY))
    pipes.until(0)
    uri = "aat://approvals/pending"
    pipes.send(request(LEGACY, 1, "resources/subscribe", {"uri": uri}))
    pipes.until(1)
    pipes.send(request(LEGACY, 2, "tools/call", HELD))
    # The update belongs to no request: it comes on the session's GET stream, or not at all.
    seen = pipes.until(2)
    updates = [m for m in seen if m.get("method") == "notifications/resources/updated"]
    assert updates and updates[0]["params"]["uri"] == uri, seen
    deletes = deletes_in(served.log)
    code, _ = pipes.finish()
    assert code == 0
    deadline = time.monotonic() + 10  # the server logs the DELETE after answering it
    while deletes_in(served.log) == deletes and time.monotonic() < deadline:
        time.sleep(0.05)
    assert deletes_in(served.log) == deletes + 1


def deletes_in(log: Path) -> int:
    """How many DELETEs of a session the server answered, by its access log."""
    return log.read_text().count('"DELETE /mcp HTTP/1.1" 200')


def test_a_cancelled_sessionless_call_closes_its_request(pipes: Pipes) -> None:
    pipes.send(request("2026-07-28", 1, "tools/call", HELD))
    time.sleep(0.5)
    cancel = {"requestId": 1, "reason": "the user pressed Esc"}
    pipes.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
    started = time.monotonic()
    code, written = pipes.finish()
    # Closing the POST is the cancel: the relay does not sit out the approval wait.
    assert code == 0 and time.monotonic() - started < APPROVAL_WAIT_S / 2
    assert not [m for m in written if m.get("id") == 1], written


def test_the_relay_loads_no_sdk_and_holds_little(pipes: Pipes) -> None:
    pipes.send(*handshake(LEGACY))
    assert pipes.until(0)[-1]["result"]["serverInfo"]["name"] == "aat"
    pid = pipes.proc.pid
    maps = Path(f"/proc/{pid}/maps").read_text()
    for heavy in ("pydantic_core", "sqlalchemy", "_sqlite3", "_cffi_backend"):
        assert heavy not in maps, f"the relay loaded {heavy}"
    status = Path(f"/proc/{pid}/status").read_text()
    rss_mb = int(status.split("VmRSS:")[1].split()[0]) / 1024
    assert rss_mb <= 30, f"the relay holds {rss_mb:.0f} MB"


async def test_a_server_lost_mid_session_is_a_tool_error(tmp_path: Path) -> None:
    env = aat_env(AAT_HOME=str(tmp_path / "home"))
    with contextlib.ExitStack() as server:
        url = server.enter_context(aat_serve(env=env, port=free_port(), log=tmp_path / "log"))
        params = StdioServerParameters(
            command=AAT[0], args=[*AAT[1:], "mcp", "--url", f"{url}/mcp"], env=aat_env()
        )
        async with Client(params) as client:
            assert (await client.list_tools()).tools
            server.close()  # `aat serve` stops while the client still talks to the relay
            result = await client.call_tool("run_tool", HELLO["arguments"])
    assert result.is_error, result
    assert f"cannot reach aat at {url}/mcp" in body(result)["error"]


def test_a_restarted_server_gets_a_new_session_and_the_call(tmp_path: Path) -> None:
    env = aat_env(AAT_HOME=str(tmp_path / "home"))
    port = free_port()
    with aat_serve(env=env, port=port, log=tmp_path / "first.log") as base:
        relay = Pipes(Served(f"{base}/mcp", "", tmp_path / "first.log"), tmp_path)
        relay.send(*handshake(LEGACY), request(LEGACY, 1, "tools/call", HELLO))
        assert answer_of(relay.until(1)[-1])["status"] == "succeeded"
    try:
        with aat_serve(env=env, port=port, log=tmp_path / "second.log"):
            # The new server knows nothing of the session: the relay opens another one
            # with the client's own initialize, and the call runs there, once.
            relay.send(request(LEGACY, 2, "tools/call", HELLO))
            ran = answer_of(relay.until(2)[-1])
            code, _ = relay.finish()
    finally:
        relay.proc.kill()
    assert ran["status"] == "succeeded", ran
    assert code == 0
