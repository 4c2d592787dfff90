"""Hostile JSON-RPC on `aat mcp`'s stdin: one long-lived bridge keeps answering.

After every malformed, mistyped or oversized line, a valid request still gets its answer,
and every line the bridge writes to stdout is JSON-RPC.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

pytestmark = pytest.mark.integration

METHODS = ["initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read",
           "server/discover", "notifications/initialized", "notifications/cancelled",
           "completion/complete", "logging/setLevel", "nope", ""]  # fmt: skip
TOOLS = ["capabilities", "run_tool", "run_tool_confirmed", "get_skill", "job_status", "nope"]


class Bridge:
    """`aat mcp` with pipes; stdout lines are read on a thread into a queue."""

    def __init__(self, home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
        env |= {"AAT_HOME": str(home), "AAT_APPROVAL_WAIT_S": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webplatform", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.other: dict[Any, dict[str, Any]] = {}  # answers to non-probe ids, by id
        self.unreadable: list[dict[str, Any]] = []  # error answers to lines without an id
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stdout: IO[bytes]) -> None:
        for line in iter(stdout.readline, b""):
            self.lines.put(line)

    def send(self, data: bytes) -> None:
        self.stdin.write(data + b"\n")
        self.stdin.flush()

    def ask(self, method: str, params: dict[str, Any], timeout_s: float = 30) -> dict[str, Any]:
        """Send a valid request and return its answer; every stdout line must be JSON-RPC."""
        id_ = f"probe-{uuid.uuid4().hex}"
        self.send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
                  .encode())  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.proc.poll() is None, "the bridge exited"
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no answer to {method} within {timeout_s:g} s")
            message = json.loads(line)
            assert message.get("jsonrpc") == "2.0", line[:300]
            if message.get("id") == id_:
                return dict(message)
            if isinstance(message.get("id"), str | int):
                self.other[message["id"]] = message
            elif "id" in message and message["id"] is None and "error" in message:
                self.unreadable.append(message)


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    running = Bridge(tmp_path_factory.mktemp("fuzz-home"))
    init = running.ask(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "fuzzer", "version": "1"},
        },
    )
    assert init["result"]["protocolVersion"] == "2025-11-25"
    running.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    yield running
    running.stdin.close()
    try:
        running.proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        running.proc.kill()
        running.proc.wait()


def _still_answers(bridge: Bridge) -> None:
    assert bridge.ask("ping", {})["result"] == {}


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=15,
)
RPC_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2, None]),
        "id": st.one_of(st.integers(), st.text(max_size=5), st.none(), JSON),
        "method": st.one_of(st.sampled_from(METHODS), st.text(max_size=10), JSON),
        "params": st.one_of(
            JSON,
            st.fixed_dictionaries(
                {"name": st.sampled_from(TOOLS)}, optional={"arguments": JSON, "_meta": JSON}
            ),
        ),
        "result": JSON,
        "error": JSON,
    },
)
GARBAGE = st.one_of(
    st.text(max_size=200).map(lambda t: t.replace("\n", " ").encode("utf-8", "surrogatepass")),
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" ")),
    JSON.map(lambda v: json.dumps(v).encode()),
    RPC_LIKE.map(lambda v: json.dumps(v).encode()),
    RPC_LIKE.map(lambda v: json.dumps(v).encode()[: max(1, len(json.dumps(v)) // 2)]),
)


@hsettings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(garbage=GARBAGE)
def test_after_any_garbage_line_a_valid_request_is_answered(bridge: Bridge, garbage: bytes) -> None:
    bridge.send(garbage)
    _still_answers(bridge)


BIG = 4 * 1024 * 1024
OVERSIZED = {
    "4 MB of letters": b"a" * BIG,
    "4 MB JSON string": json.dumps({"jsonrpc": "2.0", "id": "s", "method": "x" * BIG}).encode(),
    "4 MB tool name": json.dumps(
        {
            "jsonrpc": "2.0",
            "id": "t",
            "method": "tools/call",
            "params": {"name": "run_tool", "arguments": {"tool": "y" * BIG}},
        }
    ).encode(),  # fmt: skip
    "1 MB argument name": json.dumps(
        {
            "jsonrpc": "2.0",
            "id": "a",
            "method": "tools/call",
            "params": {
                "name": "run_tool",
                "arguments": {"tool": "hello-world", "args": {"n" * (1 << 20): "x"}},
            },
        }
    ).encode(),  # fmt: skip
    "100k nested arrays": b"[" * 100_000 + b"]" * 100_000,
    "100k nested arguments": (
        b'{"jsonrpc": "2.0", "id": "d", "method": "tools/call", "params": '
        b'{"name": "capabilities", "arguments": {"search": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}}}"
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", list(OVERSIZED))
def test_oversized_lines_are_survived(bridge: Bridge, name: str) -> None:
    started = time.monotonic()
    bridge.send(OVERSIZED[name])
    _still_answers(bridge)
    assert time.monotonic() - started < 30


def test_oversized_requests_with_an_id_get_their_own_short_answer(bridge: Bridge) -> None:
    # After the parametrised test above (file order). Lines too deeply nested to parse have
    # no readable id: they get an error answer with a null id (the next test); the others
    # get one to their id, clipped, not echoed back.
    deadline = time.monotonic() + 60
    while not {"s", "t", "a"} <= set(bridge.other):
        assert time.monotonic() < deadline, sorted(map(str, bridge.other))
        _still_answers(bridge)
        time.sleep(0.1)
    assert "error" in bridge.other["s"]
    for id_ in ("t", "a"):
        result = bridge.other[id_]["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["status"] == "invalid"
        assert len(json.dumps(result)) < 100_000, "the answer does not echo megabytes back"


@pytest.mark.parametrize(
    ("name", "code", "words"),
    [
        ("100k nested arrays", -32700, "nested too deeply"),
        ("100k nested arguments", -32700, "nested too deeply"),
        ("4 MB of letters", -32700, "Parse error"),
    ],
)
def test_a_line_too_large_or_deep_to_parse_gets_an_error_answer(
    bridge: Bridge, name: str, code: int, words: str
) -> None:
    _still_answers(bridge)
    bridge.unreadable.clear()
    bridge.send(OVERSIZED[name])
    _still_answers(bridge)  # answers come in order: the error is read before the ping's
    assert len(bridge.unreadable) == 1, "no answer to a line that could not be parsed"
    error = bridge.unreadable[0]["error"]
    assert error["code"] == code and words in error["message"]
    assert len(json.dumps(bridge.unreadable[0])) < 1_000


def test_tools_still_work_after_the_fuzzing(bridge: Bridge) -> None:
    answer = bridge.ask(
        "tools/call",
        {"name": "run_tool", "arguments": {"tool": "hello-world", "args": {"name": "still here"}}},
    )
    assert answer["result"]["structuredContent"]["result"] == {"greeting": "Hello, still here!"}
