"""`aat mcp` relaying to `aat serve` (`webplatform.mcp.transports.handoff`): standard library."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from webplatform.mcp.transports import handoff


def test_a_socket_in_a_long_home_is_reached_through_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / ("deep-" * 30) / "run"
    folder.mkdir(parents=True)
    assert len(str(folder / handoff.SOCKET_NAME)) > 108  # too long for sun_path by name
    with socket.socket(socket.AF_UNIX) as server:
        with handoff.reachable_path(str(folder), handoff.SOCKET_NAME) as path:
            server.bind(path)
        server.listen()
        assert (folder / handoff.SOCKET_NAME).is_socket()
        with socket.socket(socket.AF_UNIX) as client:
            with handoff.reachable_path(str(folder), handoff.SOCKET_NAME) as path:
                client.connect(path)
            accepted, _ = server.accept()
            client.sendall(b"hi")
            assert accepted.recv(2) == b"hi"
            accepted.close()


def test_options_are_read_and_anything_else_is_left_to_the_command_line() -> None:
    read = handoff.parse_mcp_args(["--registry", "a", "--registry=b", "--db", "sqlite://"])
    assert read == {"surface": "generic", "registry": ["a", "b"], "db": "sqlite://", "url": None}
    assert handoff.parse_mcp_args(["--surface", "chat"])["surface"] == "chat"  # type: ignore[index]
    for other in (["--help"], ["--surface", "nope"], ["--registry"], ["extra"]):
        assert handoff.parse_mcp_args(other) is None


def test_the_hello_carries_no_secret_and_absolute_paths(tmp_path: Path) -> None:
    environ = {
        "AAT_HOME": "rel-home",
        "AAT_DB_URL": "postgresql://aat:hunter2@db/aat",
        "AAT_NOTIFY": "",
        "AAT_AGENT_TOKEN": "aat_secret",
        "AAT_MCP_TOKEN": "shared-secret",
        "aat_approval_wait_s": "3",
        "PATH": "/usr/bin",
    }
    options = {"surface": "generic", "registry": ["tools", "/abs/more"], "db": None, "url": None}
    env = handoff.hello_env(environ, options)
    text = json.dumps(env)
    assert "hunter2" not in text and "secret" not in text
    assert env["AAT_DB_URL"] == handoff.digest("postgresql://aat:hunter2@db/aat")
    assert "AAT_NOTIFY" not in env and "PATH" not in env
    assert Path(env["AAT_HOME"]).is_absolute()
    assert env["AAT_REGISTRY"].split(":") == [os.path.abspath("tools"), "/abs/more"]
    assert env["AAT_APPROVAL_WAIT_S"] == "3"


def test_the_entry_point_reaches_the_relay_on_the_standard_library_alone() -> None:
    code = (
        "import sys, webplatform.cli, webplatform.mcp.transports.handoff; "
        "print(sorted(m.split('.')[0] for m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(done.stdout.replace("'", '"')))
    assert not loaded & {"mcp", "mcp_types", "pydantic", "sqlalchemy", "sqlmodel", "anyio"}
