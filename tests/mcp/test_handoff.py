"""`aat mcp` handing its session to a running `aat serve` over the socket in `AAT_HOME`.

Real processes throughout: `aat serve`, `aat mcp` started by the SDK's stdio client, the
database read back with sqlite3. A session the server served records the relay's OS user as
the request's address (`unix:USER`); one served in-process records none.
"""

from __future__ import annotations

import getpass
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_helpers import ERAS, body
from serving import aat_env, aat_serve, free_port
from workspaces import aat_home_beside

pytestmark = [pytest.mark.anyio, pytest.mark.integration]  # starts aat processes

AAT = [sys.executable, "-m", "webplatform"]
SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "hi", "body": "x"},
}
RELAYED = f"unix:{getpass.getuser()}"


def home_env(home: Path, **extra: str) -> dict[str, str]:
    return aat_env(home, **{"AAT_APPROVAL_WAIT_S": "1", **extra})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A running `aat serve`; yields its AAT_HOME."""
    work = tmp_path_factory.mktemp("served")
    home = aat_home_beside(work)
    with aat_serve(env=home_env(home), port=free_port(), log=work / "serve.log"):
        yield home


def bridge(home: Path, cwd: Path, *args: str, **extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=AAT[0], args=[*AAT[1:], "mcp", *args], env=home_env(home, **extra), cwd=cwd
    )


def request_addresses(home: Path, job: int) -> set[str | None]:
    """The addresses the audit trail recorded for job `job`, read from the database file."""
    with sqlite3.connect(home / "aat.db") as db:
        rows = db.execute("SELECT address FROM audit_event WHERE job_id = ?", (job,)).fetchall()
    assert rows, f"job {job} is not in {home / 'aat.db'}"
    return {row[0] for row in rows}


async def queue_and_run(params: StdioServerParameters, mode: str = "legacy") -> int:
    """List, run hello-world and queue send-message through `aat mcp`; the queued job's id."""
    async with Client(params, mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"capabilities", "run_tool", "run_tool_confirmed", "job_status"} <= names
        ran = body(
            await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "Ada"}})
        )
        assert ran["status"] == "succeeded", json.dumps(ran)
        assert ran["result"] == {"greeting": "Hello, Ada!"}
        queued = body(await client.call_tool("run_tool_confirmed", SEND))
        assert queued["status"] == "pending_approval", queued
        job = queued["job"]
        assert isinstance(job, int)
        return job


@pytest.mark.parametrize("mode", ERAS)
async def test_a_running_serve_serves_the_session(served: Path, tmp_path: Path, mode: str) -> None:
    job = await queue_and_run(bridge(served, tmp_path), mode)
    assert request_addresses(served, job) == {RELAYED}


def test_the_relay_loads_no_sdk_and_opens_no_database(served: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*AAT, "mcp"],
        env=home_env(served),
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        proc.stdin.write(json.dumps(hello).encode() + b"\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer["result"]["serverInfo"]["name"] == "aat"
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        for heavy in ("pydantic_core", "sqlalchemy", "_sqlite3"):
            assert heavy not in maps, f"the relay loaded {heavy}"
        open_files = [os.readlink(fd) for fd in Path(f"/proc/{proc.pid}/fd").iterdir()]
        assert not any("aat.db" in name for name in open_files), open_files
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""


def stale_socket(home: Path) -> None:
    """Leave what a killed `aat serve` leaves: a socket file nobody listens on."""
    folder = home / "run"
    folder.mkdir(mode=0o700, parents=True)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(folder / "mcp.sock"))


@pytest.mark.parametrize("leftover", ["nothing", "a stale socket"])
async def test_without_a_server_aat_mcp_serves_in_process(tmp_path: Path, leftover: str) -> None:
    home = aat_home_beside(tmp_path)
    if leftover == "a stale socket":
        stale_socket(home)
    job = await queue_and_run(bridge(home, tmp_path))
    assert request_addresses(home, job) == {None}


EXAMPLES = Path(__file__).parents[2] / "webplatform" / "examples"


@pytest.mark.parametrize("differs", ["registry", "setting"])
async def test_a_server_for_other_settings_is_not_used(
    served: Path, tmp_path: Path, differs: str
) -> None:
    if differs == "registry":
        more = tmp_path.parent / f"{tmp_path.name}-tools"  # outside the caller's folder
        more.mkdir()
        extra = {"AAT_REGISTRY": f"{EXAMPLES}:{more}"}
    else:
        extra = {"AAT_APPROVAL_WAIT_S": "2"}
    job = await queue_and_run(bridge(served, tmp_path, **extra))
    assert request_addresses(served, job) == {None}


async def test_the_same_registry_named_differently_is_still_served(
    served: Path, tmp_path: Path
) -> None:
    params = bridge(served, tmp_path, "--registry", str(EXAMPLES / ".." / "examples"))
    job = await queue_and_run(params)
    assert request_addresses(served, job) == {RELAYED}


async def test_no_human_in_the_seat_is_kept_by_serving_in_process(
    served: Path, tmp_path: Path
) -> None:
    params = bridge(served, tmp_path, AAT_MCP_DENY_IRREVERSIBLE="1")
    async with Client(params) as client:
        refused = body(await client.call_tool("run_tool_confirmed", SEND))
    assert refused["status"] == "refused"


async def test_a_server_killed_mid_session_ends_the_call_with_an_error(tmp_path: Path) -> None:
    home = aat_home_beside(tmp_path)
    env = home_env(home, AAT_APPROVAL_WAIT_S="60")
    port = free_port()
    failure: list[BaseException] = []
    with aat_serve(env=env, port=port, log=tmp_path / "serve.log"):
        pid = _serve_pid(port)
        params = bridge(home, tmp_path, AAT_APPROVAL_WAIT_S="60")
        with anyio.fail_after(60):  # a hang fails here instead of stalling the suite
            async with Client(params) as client:
                assert body(await client.call_tool("run_tool", {"tool": "hello-world"}))
                async with anyio.create_task_group() as tg:

                    async def call() -> None:
                        try:
                            await client.call_tool("run_tool_confirmed", SEND)
                        except Exception as exc:
                            failure.append(exc)

                    tg.start_soon(call)
                    await _wait_for_pending(home)
                    os.kill(pid, signal.SIGKILL)
        assert failure, "the waiting call must fail once its server is gone"
        assert "closed" in str(failure[0]).lower(), failure[0]
    # Its socket is left behind, stale: the next `aat mcp` serves in-process.
    assert (home / "run" / "mcp.sock").exists()
    job = await queue_and_run(bridge(home, tmp_path))
    assert request_addresses(home, job) == {None}
    # The next `aat serve` replaces it, and takes sessions again.
    with aat_serve(env=home_env(home), port=free_port(), log=tmp_path / "serve2.log"):
        job = await queue_and_run(bridge(home, tmp_path))
    assert request_addresses(home, job) == {RELAYED}


def _serve_pid(port: int) -> int:
    """The pid of the `aat serve` listening on `port` (the one the test started)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and str(port).encode() in argv:
            return int(proc.name)
    raise AssertionError(f"no aat serve on port {port}")


async def _wait_for_pending(home: Path) -> None:
    while True:
        with sqlite3.connect(home / "aat.db") as db:
            row: Any = db.execute(
                "SELECT count(*) FROM job WHERE state = 'pending_approval'"
            ).fetchone()
        if row[0]:
            return
        await anyio.sleep(0.05)


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "piped", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


# The call that greets "Pipe", on each surface: the generic one's run_tool, the chat one's own tool.
GREET = {
    "generic": {"name": "run_tool", "arguments": {"tool": "hello-world", "args": {"name": "Pipe"}}},
    "chat": {"name": "demo_hello-world_greet", "arguments": {"name": "Pipe"}},
}


def piped_requests(era: str, surface: str) -> str:
    """Two requests (and, on the legacy era, the initialized notice), as one would pipe them."""

    def request(id_: int, method: str, params: dict[str, Any]) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})

    greet = GREET[surface]
    if era == "legacy":
        hello = {"protocolVersion": "2025-11-25", "capabilities": {},
                 "clientInfo": {"name": "piped", "version": "1"}}  # fmt: skip
        lines = [
            request(1, "initialize", hello),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            request(2, "tools/call", greet),
        ]
    else:
        lines = [
            request(1, "server/discover", {"_meta": MODERN_META}),
            request(2, "tools/call", {**greet, "_meta": MODERN_META}),
        ]
    return "".join(line + "\n" for line in lines)


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("where", ["relayed", "in-process"])
@pytest.mark.parametrize("surface", ["generic", "chat"])
def test_piped_requests_are_all_answered_before_exit(
    served: Path, tmp_path: Path, mode: str, where: str, surface: str
) -> None:
    # `printf '...' | aat mcp` closes stdin right after the requests: the bridge used to exit
    # first and drop the tool call's answer.
    home = served if where == "relayed" else aat_home_beside(tmp_path)
    proc = subprocess.run(
        [*AAT, "mcp", "--surface", surface],
        input=piped_requests(mode, surface),
        capture_output=True,
        text=True,
        env=home_env(home),
        cwd=tmp_path,
        timeout=60,
    )
    answers = {m["id"]: m for m in map(json.loads, proc.stdout.splitlines()) if "id" in m}
    assert proc.returncode == 0, proc.stderr
    assert set(answers) == {1, 2}, proc.stdout
    greeting = json.loads(answers[2]["result"]["content"][0]["text"])
    assert greeting["status"] == "succeeded", greeting
    assert greeting["result"] == {"greeting": "Hello, Pipe!"}


async def test_links_point_at_the_port_served(tmp_path: Path) -> None:
    # `aat serve --port N` without AAT_DASHBOARD_URL used to hand out links to port 8000.
    home = aat_home_beside(tmp_path)
    port = free_port()
    with aat_serve(env=home_env(home), port=port, log=tmp_path / "serve.log"):
        async with Client(bridge(home, tmp_path)) as client:
            queued = body(await client.call_tool("run_tool_confirmed", SEND))
    # On loopback the links name `localhost`, the host passkeys work on (SPEC §25).
    assert queued["approval_url"] == f"http://localhost:{port}/jobs/{queued['job']}"
