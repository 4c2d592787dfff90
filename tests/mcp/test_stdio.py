"""`aat mcp` as a real process: the SDK client in both eras, raw bad input, version negotiation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp_helpers import ERAS, body

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

BRIDGE = [sys.executable, "-m", "webplatform", "mcp"]
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def bridge_env(home: Path) -> dict[str, str]:
    return {**os.environ, "AAT_HOME": str(home), "AAT_APPROVAL_WAIT_S": "1"}


@pytest.mark.parametrize("mode", ERAS)
async def test_sdk_client_over_stdio(tmp_path: Path, mode: str) -> None:
    params = StdioServerParameters(command=BRIDGE[0], args=BRIDGE[1:], env=bridge_env(tmp_path))
    async with Client(params, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        names = [t.name for t in (await client.list_tools()).tools]
        assert "run_tool_confirmed" in names
        ran = body(
            await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "Ünï"}})
        )
        assert ran["result"] == {"greeting": "Hello, Ünï!"}
        queued = body(await client.call_tool("run_tool_confirmed", {
            "tool": "outbox", "action": "delete-messages", "args": {},
        }))  # fmt: skip
        assert queued["status"] == "pending_approval"


def exchange(
    home: Path, lines: list[str], expect_ids: set[int], argv: list[str] = BRIDGE, stderr: Any = None
) -> list[dict[str, Any]]:
    """Write raw lines to `aat mcp`, read stdout until every expected id is answered, hang up."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr if stderr is not None else subprocess.DEVNULL,
        text=True,
        env=bridge_env(home),
    )
    assert proc.stdin is not None and proc.stdout is not None
    timer = threading.Timer(60, proc.kill)
    timer.start()
    try:
        proc.stdin.write("".join(line + "\n" for line in lines))
        proc.stdin.flush()
        out: list[dict[str, Any]] = []
        while expect_ids - {m.get("id") for m in out}:
            line = proc.stdout.readline()
            assert line, f"bridge closed stdout; got {out}"
            out.append(json.loads(line))  # every stdout line must be JSON
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        return out
    finally:
        timer.cancel()
        proc.kill()


def request(id_: int, method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})


INIT = request(
    1,
    "initialize",
    {
        "protocolVersion": "2026-07-28",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
)
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})


def test_stdout_is_protocol_only_and_garbage_is_survived(tmp_path: Path) -> None:
    lines = [
        "this is not json",
        '{"jsonrpc": "2.0", "id": 99, "method": "tools/li',  # truncated
        "[1, 2",
        INIT,
        INITIALIZED,
        "\x00\x01 binary junk",
        request(2, "tools/call", {"name": "run_tool", "arguments": {"tool": "hello-world",
                                                                     "args": {"name": 5}}}),
        request(3, "tools/call", {"name": "run_tool", "arguments": {"tool": "hello-world",
                                                                     "args": {"name": "ok"}}}),
    ]  # fmt: skip
    out = exchange(tmp_path, lines, {1, 2, 3})
    assert all(msg.get("jsonrpc") == "2.0" for msg in out)  # every stdout line is JSON-RPC
    by_id = {msg.get("id"): msg for msg in out if "id" in msg}
    # initialize asking for 2026-07-28 is answered with the handshake version it implements
    assert by_id[1]["result"]["protocolVersion"] == "2025-11-25"
    bad = by_id[2]["result"]
    assert bad["isError"] is True and bad["structuredContent"]["status"] == "invalid"
    good = by_id[3]["result"]
    assert good["isError"] is False
    assert good["structuredContent"]["result"] == {"greeting": "Hello, ok!"}


def test_unsupported_modern_version_gets_32022(tmp_path: Path) -> None:
    meta = {**MODERN_META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    out = exchange(tmp_path, [request(1, "server/discover", {"_meta": meta})], {1})
    error = out[0]["error"]
    assert error["code"] == -32022
    assert error["data"]["requested"] == "2099-01-01"
    assert "2026-07-28" in error["data"]["supported"]


def test_modern_discover_and_call_over_raw_stdio(tmp_path: Path) -> None:
    call = {"name": "capabilities", "arguments": {"name": "hello-world", "action": "greet"},
            "_meta": MODERN_META}  # fmt: skip
    out = exchange(
        tmp_path,
        [request(1, "server/discover", {"_meta": MODERN_META}), request(2, "tools/call", call)],
        {1, 2},
    )
    by_id = {msg["id"]: msg for msg in out if "id" in msg}
    discovered = by_id[1]["result"]
    assert discovered["supportedVersions"] == ["2026-07-28"]
    assert len(discovered["_meta"]["aat/toolsDigest"]) == 64
    shape = by_id[2]["result"]["structuredContent"]["call"]
    assert shape == {"tool": "run_tool", "arguments": {"tool": "hello-world", "action": "greet",
                                                       "args": {"name": "<string>"}}}  # fmt: skip


NOISY_BRIDGE = """
import warnings
from webplatform.config import get_settings
from webplatform.mcp import run_stdio
from webplatform.mcp.arguments import CapabilitiesArguments
from webplatform.mcp.bridge import Bridge

original = Bridge.capabilities

async def noisy(self, arguments: CapabilitiesArguments):
    print("NOISE FROM A PRINT")
    warnings.warn("NOISE FROM A WARNING")
    return await original(self, arguments)

Bridge.capabilities = noisy
run_stdio(get_settings())
"""


def test_prints_and_warnings_never_reach_stdout(tmp_path: Path) -> None:
    lines = [
        INIT,
        INITIALIZED,
        request(2, "tools/call", {"name": "capabilities", "arguments": {}}),
    ]
    with (tmp_path / "stderr.txt").open("w+") as err:
        out = exchange(tmp_path, lines, {1, 2}, [sys.executable, "-c", NOISY_BRIDGE], err)
        err.seek(0)
        stderr = err.read()
    assert "NOISE FROM A PRINT" in stderr and "NOISE FROM A WARNING" in stderr
    assert {m["id"] for m in out} == {1, 2}  # stdout carried protocol messages only
    assert out[1]["result"]["isError"] is False


def test_a_session_that_ends_leaves_stderr_silent(tmp_path: Path) -> None:
    # The client closing stdin is the normal end of a stdio session: no warning about a
    # stream left open (Python shows ResourceWarning with -W, as a client's log would).
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as sink:
        out = exchange(
            tmp_path,
            [INIT, INITIALIZED, request(2, "tools/list", {})],
            {1, 2},
            argv=[sys.executable, "-W", "always::ResourceWarning", *BRIDGE[1:]],
            stderr=sink,
        )
    assert "tools" in next(m for m in out if m.get("id") == 2)["result"]
    assert errors.read_text() == ""
