"""Tools reach only what they declare (SPEC §17): real listeners, real sockets, real namespaces.

Each attempt runs twice, spawned plain and forked from the tool's warm interpreter. The test
starts what a tool must not reach, as the host would have it: TCP listeners on 127.0.0.1
(the dashboard's port, a PostgreSQL-like one, any other), this user's Unix sockets (an
ssh-agent that SSH_AUTH_SOCK points at, D-Bus in /run/user/UID, aat's relay socket in
AAT_HOME/run), an abstract Unix socket and a UDP port; a tool reaches one only when its
manifest's `network:` says so, and a listener that was reached says so too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from workspaces import aat_home_beside

from webplatform.config import Settings
from webplatform.jobs.answers import Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.process import confine, runner
from webplatform.process.confine import landlock
from webplatform.process.outcome import RunResult
from webplatform.registry import RegistryLoader
from webplatform.registry.model import NetworkReach, ToolSpec
from webplatform.store.models import Surface

NET = Path(__file__).parent / "tools" / "net"
NO_NETWORK = "its manifest allows no network connection (`network: none`, the default)"
WARMLY = pytest.mark.parametrize("warmly", [False, True], ids=["plain", "warm"])


class Listener:
    """A socket of the host's that a tool might reach; `reached()` says whether it was."""

    def __init__(self, sock: socket.socket, name: str) -> None:
        self.sock = sock
        self.name = name
        self.port = 0 if sock.family == socket.AF_UNIX else int(sock.getsockname()[1])

    def reached(self) -> bool:
        self.sock.settimeout(0.2)
        try:
            if self.sock.type == socket.SOCK_DGRAM:
                self.sock.recv(100)
            else:
                self.sock.accept()[0].close()
        except TimeoutError:
            return False
        return True


@contextmanager
def listening(family: int, address: object, kind: int = socket.SOCK_STREAM) -> Iterator[Listener]:
    sock = socket.socket(family, kind)
    try:
        sock.bind(address)
        if kind == socket.SOCK_STREAM:
            sock.listen()
        name = address if isinstance(address, str) else ""
        yield Listener(sock, name)
    finally:
        sock.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def net_tool(tmp_path: Path, network: str | None = None) -> ToolSpec:
    """The `net` fixture tool in a registry of its own, with `network:` as given."""
    root = tmp_path / f"registry-{uuid.uuid4().hex[:6]}"
    folder = root / "tools" / "net"
    shutil.copytree(NET, folder)
    if network is not None:
        manifest = folder / "tool.yaml"
        text = manifest.read_text()
        manifest.write_text(text.replace("actions:", f"network: {network}\nactions:", 1))
    registry = RegistryLoader([root]).load()
    assert not registry.errors, [str(e) for e in registry.errors]
    return registry.tools["net"]


def attempt(tool: ToolSpec, action: str, target: object, *, warmly: bool, home: Path) -> RunResult:
    spec = replace(tool, warm=warmly)
    found = spec.action(action)
    assert found is not None
    fence = confine.Fence(home=home, registry_roots=(tool.folder.parent.parent,))
    return runner.run(runner.ToolCall(spec, found, {"target": target}, home=home, fence=fence))


def refused(result: RunResult, *words: str) -> None:
    assert result.outcome == "failed", result
    assert result.error is not None
    for word in words:
        assert word in result.error, result.error


# --- network: none (the default) ---------------------------------------------------------------


@WARMLY
def test_a_tool_reaches_no_port_of_the_host(tmp_path: Path, home: Path, warmly: bool) -> None:
    tool = net_tool(tmp_path)
    assert str(tool.network) == "none"
    for name in ("the dashboard", "PostgreSQL", "any other port"):
        with listening(socket.AF_INET, ("127.0.0.1", 0)) as listener:
            result = attempt(tool, "connect", listener.port, warmly=warmly, home=home)
            assert not listener.reached(), name
        # Landlock refuses it (ABI 4 and later); behind that wall, the tool's own network has
        # a loopback with nothing listening on it.
        why = "Permission denied" if landlock.abi_version() >= 4 else "Connection refused"
        refused(result, f"connect 127.0.0.1:{listener.port}: {why}", NO_NETWORK)


@WARMLY
def test_a_tool_cannot_listen(tmp_path: Path, home: Path, warmly: bool) -> None:
    with listening(socket.AF_INET, ("127.0.0.1", 0)) as probe:
        port = probe.port
    result = attempt(net_tool(tmp_path), "listen", port, warmly=warmly, home=home)
    # Landlock's TCP rules (ABI 4 and later) refuse it even in the tool's own network.
    assert landlock.abi_version() >= landlock.NET_ABI
    refused(result, f"listen on 127.0.0.1:{port}: Permission denied", NO_NETWORK)


@WARMLY
def test_no_datagram_leaves_a_tools_own_network(tmp_path: Path, home: Path, warmly: bool) -> None:
    with listening(socket.AF_INET, ("127.0.0.1", 0), socket.SOCK_DGRAM) as listener:
        attempt(net_tool(tmp_path), "udp", listener.port, warmly=warmly, home=home)
        assert not listener.reached()


@pytest.fixture
def user_sockets(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """This user's sockets where a desktop session has them: an ssh-agent (SSH_AUTH_SOCK),
    D-Bus in /run/user/UID, aat's relay in AAT_HOME/run. Their folders are made here when
    missing, and removed again."""
    runtime = Path(f"/run/user/{os.getuid()}")
    made = [p for p in (runtime.parent, runtime) if not p.exists()]
    for folder in made:
        folder.mkdir(mode=0o755 if folder == runtime.parent else 0o700)
    agent = Path(f"/tmp/ssh-{uuid.uuid4().hex[:8]}")
    agent.mkdir(mode=0o700)
    (home / "run").mkdir(mode=0o700)
    bus = runtime / "bus"  # a session's own D-Bus socket, when there is none already
    paths = {
        "ssh-agent": agent / "agent.1234",
        "D-Bus": runtime / f"bus-{uuid.uuid4().hex[:6]}" if bus.exists() else bus,
        "aat's relay": home / "run" / "mcp.sock",
    }
    monkeypatch.setenv("SSH_AUTH_SOCK", str(paths["ssh-agent"]))
    try:
        with (
            listening(socket.AF_UNIX, str(paths["ssh-agent"])) as ssh,
            listening(socket.AF_UNIX, str(paths["D-Bus"])) as bus,
            listening(socket.AF_UNIX, str(paths["aat's relay"])) as relay,
        ):
            yield {"ssh-agent": ssh, "D-Bus": bus, "aat's relay": relay}
    finally:
        paths["D-Bus"].unlink(missing_ok=True)
        shutil.rmtree(agent, ignore_errors=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):  # another test may be using it
                folder.rmdir()


@WARMLY
@pytest.mark.parametrize("network", [None, "any"], ids=["none", "any"])
def test_this_users_sockets_are_not_there(
    tmp_path: Path, home: Path, user_sockets: dict[str, Listener], warmly: bool, network: str
) -> None:
    tool = net_tool(tmp_path, network)
    for name, listener in user_sockets.items():
        result = attempt(tool, "unix", listener.name, warmly=warmly, home=home)
        assert not listener.reached(), name
        refused(result, f"connect {listener.name}: No such file or directory")


@WARMLY
@pytest.mark.parametrize("network", [None, "any"], ids=["none", "any"])
def test_an_abstract_socket_of_this_user_is_out_of_reach(
    tmp_path: Path, home: Path, warmly: bool, network: str | None
) -> None:
    name = f"aat-test-{uuid.uuid4().hex[:8]}"
    with listening(socket.AF_UNIX, "\0" + name) as listener:
        result = attempt(net_tool(tmp_path, network), "abstract", name, warmly=warmly, home=home)
        assert not listener.reached()
    # In a network of its own the name is unknown; in the host's, Landlock (ABI 6) scopes it.
    why = "Connection refused" if network is None else "Operation not permitted"
    refused(result, f"connect @{name}: {why}")


def test_the_jobs_error_says_the_manifest_allows_no_such_connection(tmp_path: Path) -> None:
    settings = Settings(home=aat_home_beside(tmp_path), registry=str(NET.parents[1]))
    platform = Platform(settings)
    try:
        with listening(socket.AF_INET, ("127.0.0.1", 0)) as dashboard:
            answer = request_run(
                platform=platform,
                call=RunCall(
                    kind="tool", name="net", action="connect", args={"target": dashboard.port}
                ),
                actor=Actor(surface=Surface.mcp_stdio, client="test-agent"),
                consent=Consent.NONE,
            )
            assert not dashboard.reached()
    finally:
        platform.engine.dispose()
    assert answer.status is Status.failed and answer.error is not None
    assert answer.error.endswith(
        "its manifest allows no network connection (`network: none`, the default); declare "
        "the ports it needs, e.g. `network: {connect: [443]}`, or `network: any`"
    ), answer.error


# --- network: {connect: [...]}, {bind: [...]}, any ------------------------------------------------


@WARMLY
def test_declared_ports_leave_udp_open_as_the_pages_say(
    tmp_path: Path, home: Path, warmly: bool
) -> None:
    """What is not enforced, measured: a tool that declares a TCP port shares the host's
    network, and Landlock has no rules for UDP, so its datagrams reach any port of the host
    (DNS needs that). The card, the registry page and `capabilities` say `UDP not restricted`."""
    with listening(socket.AF_INET, ("127.0.0.1", 0), socket.SOCK_DGRAM) as listener:
        tool = net_tool(tmp_path, "{connect: [443]}")
        result = attempt(tool, "udp", listener.port, warmly=warmly, home=home)
        assert result.outcome == "succeeded", result.error
        assert listener.reached()
    assert tool.network.shown() == "connect 443 (UDP not restricted)"


@WARMLY
def test_connect_allows_exactly_the_declared_ports(
    tmp_path: Path, home: Path, warmly: bool
) -> None:
    with (
        listening(socket.AF_INET, ("127.0.0.1", 0)) as declared,
        listening(socket.AF_INET, ("127.0.0.1", 0)) as other,
    ):
        tool = net_tool(tmp_path, f"{{connect: [{declared.port}]}}")
        assert str(tool.network) == f"connect {declared.port}"
        reached = attempt(tool, "connect", declared.port, warmly=warmly, home=home)
        denied = attempt(tool, "connect", other.port, warmly=warmly, home=home)
        listen = attempt(tool, "listen", other.port + 1, warmly=warmly, home=home)
        assert declared.reached() and not other.reached()
    assert reached.outcome == "succeeded", reached.error
    allowed = f"its manifest allows only `network: {{connect: [{declared.port}]}}`"
    refused(denied, f"connect 127.0.0.1:{other.port}: Permission denied", allowed)
    refused(listen, "Permission denied", allowed)


@WARMLY
def test_a_refusal_printed_as_one_bare_line_still_gets_the_network_hint(
    tmp_path: Path, home: Path, warmly: bool
) -> None:
    """A tool that prints only `PermissionError: [Errno 13] Permission denied` for a refused
    connect (no traceback, no address) is told about `network:`; one refused a file is not."""
    readable = "/dev/urandom"  # in every tool's view, not writable by any
    with (
        listening(socket.AF_INET, ("127.0.0.1", 0)) as declared,
        listening(socket.AF_INET, ("127.0.0.1", 0)) as other,
    ):
        tool = net_tool(tmp_path, f"{{connect: [{declared.port}]}}")
        denied = attempt(tool, "terse", other.port, warmly=warmly, home=home)
        opened = attempt(tool, "terse-open", readable, warmly=warmly, home=home)
        assert not other.reached()
    assert denied.stderr == "PermissionError: [Errno 13] Permission denied\n"
    allowed = f"its manifest allows only `network: {{connect: [{declared.port}]}}`"
    refused(denied, "exit 1: PermissionError: [Errno 13] Permission denied; ", allowed)
    refused(opened, f"exit 1: PermissionError: [Errno 13] Permission denied: '{readable}'")
    assert "network" not in (opened.error or "")


@WARMLY
def test_bind_allows_listening_on_the_declared_port(
    tmp_path: Path, home: Path, warmly: bool
) -> None:
    with listening(socket.AF_INET, ("127.0.0.1", 0)) as probe:
        port = probe.port
    tool = net_tool(tmp_path, f"{{bind: [{port}]}}")
    listened = attempt(tool, "listen", port, warmly=warmly, home=home)
    other = attempt(tool, "listen", port + 1, warmly=warmly, home=home)
    assert listened.outcome == "succeeded", listened.error
    refused(other, "Permission denied", f"allows only `network: {{bind: [{port}]}}`")


@WARMLY
def test_any_reaches_every_port_and_listens(tmp_path: Path, home: Path, warmly: bool) -> None:
    tool = net_tool(tmp_path, "any")
    with (
        listening(socket.AF_INET, ("127.0.0.1", 0)) as one,
        listening(socket.AF_INET, ("127.0.0.1", 0)) as another,
    ):
        for listener in (one, another):
            result = attempt(tool, "connect", listener.port, warmly=warmly, home=home)
            assert result.outcome == "succeeded", result.error
            assert listener.reached()
    listen = attempt(tool, "listen", one.port, warmly=warmly, home=home)
    assert listen.outcome == "succeeded", listen.error


@pytest.mark.parametrize(
    ("error", "stderr", "hinted"),
    [
        ("exit 1: PermissionError: [Errno 13] Permission denied", "", True),
        ("exit 1: Permission denied", "", True),
        ("exit 1: boom: Permission denied", '  File "/usr/lib/python3/socket.py", line 9', True),
        ("exit 1: boom: Permission denied", "    sock.connect((host, port))", True),
        # A refused file names itself: the path's hint, never the network's.
        ("exit 1: PermissionError: [Errno 13] Permission denied: '/etc/x'", "", False),
        ("exit 1: PermissionError: [Errno 13] Permission denied: '/x'", "  s.connect(a)", False),
        ("exit 1: cat: /etc/x: Permission denied", "", False),
        ("exit 1: boom: Permission denied", "", False),
    ],
)
def test_a_bare_refusal_or_a_socket_frame_reads_as_a_refused_connection(
    error: str, stderr: str, hinted: bool
) -> None:
    for reach in (NetworkReach(connect=(443,)), NetworkReach()):
        assert (confine.explain_network(reach, error, stderr) is not None) is hinted
