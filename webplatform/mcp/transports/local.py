"""`aat serve`'s local socket: `aat mcp` sessions handed over by `transports.handoff`.

`aat serve` listens on `AAT_HOME/run/mcp.sock` (0600, in a 0700 folder; only its own OS user
may talk to it, checked again with `SO_PEERCRED`). Each connection opens with the relay's
hello (see `transports.handoff`); when the relaying `aat mcp` would serve exactly this
`AAT_HOME`, registry, database and settings, the connection gets one MCP session served with
the SDK's stdio transport, on a server built as the in-process `aat mcp` builds its own: the
same tools, outcomes and native waiting, jobs recorded from the `mcp-stdio` surface, with the
relay's folder as the caller's folder and its OS user as the address. Otherwise the server
says why and hangs up, and the relay serves in-process.

A tool runs as the same OS user and Landlock does not stop it connecting to the socket, so
the user check proves little (SPEC §19). Two more come first: the hello must carry the
secret this server wrote to `AAT_HOME/run/mcp.secret` when it started (0600; no tool is ever
granted `AAT_HOME/run`), and the folder it claims must be the connecting process's own
working folder (`/proc/PID/cwd`, the PID from `SO_PEERCRED`). A hello that fails either
gets no answer at all, and the server log one line.

One `aat serve` per `AAT_HOME` holds the socket (a lock file decides); a socket left by a
killed server is replaced by the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import json
import logging
import os
import pwd
import secrets
import socket
import struct
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteStream, SocketAttribute
from mcp.server.mcpserver import MCPServer
from pydantic import SecretStr, ValidationError

import webplatform
from webplatform import keyfiles
from webplatform.config import Settings
from webplatform.mcp.chat import ChatSurfaceError, build_chat_server
from webplatform.mcp.protocol import LOCAL_PEER, LocalPeer
from webplatform.mcp.server import build_server
from webplatform.mcp.transports import handoff
from webplatform.mcp.transports.stdio import drain_time, serve_stdio_streams
from webplatform.platform import Platform
from webplatform.store.models import Surface

logger = logging.getLogger(__name__)

# Settings that shape `aat serve` itself, not what an MCP session does or answers; a relay
# whose settings differ only in these is still served. Every other setting must agree, so a
# setting added later is compared until someone decides otherwise.
SERVE_ONLY = frozenset(
    {
        "root_path",
        "allowed_hosts",
        "trusted_proxies",
        "mcp_token",
        "mcp_url",
        "agent_token",
        "heartbeat_s",
        "retention_days",
        "watch_registry",
        "decision_public_key",
        "worker_lease_s",
    }
)
HELLO_MAX_BYTES = 256 * 1024
HELLO_WAIT_S = 5.0
LOCK_NAME = "mcp.lock"


def fingerprint(settings: Settings, *, hashed: bool = False) -> dict[str, Any]:
    """What of `settings` an MCP session depends on, paths resolved, secrets as digests.

    `hashed`: the secret fields already hold digests (settings read from a relay's hello).
    """
    found: dict[str, Any] = {}
    for name in Settings.model_fields:
        if name in SERVE_ONLY:
            continue
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            secret = value.get_secret_value()
            if name == "db_url" and not hashed:
                secret = handoff.absolute_db_url(secret)
            value = secret if hashed or not secret else handoff.digest(secret)
        found[name] = value
    found["home"] = settings.home.expanduser().resolve()
    found["registry"] = [p.resolve() for p in settings.registry_roots]
    found["workspaces"] = [
        Path(p).expanduser().resolve() for p in settings.workspaces.split(":") if p.strip()
    ]
    return found


def settings_of(env: Mapping[str, str]) -> Settings:
    """Settings from a hello's `AAT_*` variables alone (not this process's environment)."""
    prefix = len("AAT_")
    values = {k[prefix:].lower(): v for k, v in env.items() if k.startswith("AAT_")}
    return Settings.model_validate(values)


def refusal(settings: Settings, hello: Any) -> str | None:
    """Why this server will not serve the session `hello` asks for; None when it will."""
    if not isinstance(hello, dict) or hello.get("aat_handoff") != handoff.HANDOFF_VERSION:
        return "not an aat mcp hello this server speaks"
    if hello.get("version") != webplatform.__version__:
        return f"aat {hello.get('version')} relayed to aat {webplatform.__version__}"
    env, cwd = hello.get("env"), hello.get("cwd")
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        return "the hello carries no settings"
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        return "the hello carries no working folder"
    if hello.get("surface") not in ("generic", "chat"):
        return "unknown surface"
    try:
        theirs = fingerprint(settings_of(env), hashed=True)
    except ValidationError:
        return "the relay's settings are invalid (it reports them in-process)"
    ours = fingerprint(settings)
    if "AAT_DASHBOARD_URL" not in env:
        # A relay that did not choose where links point takes the server's (its served port).
        theirs["dashboard_url"] = ours["dashboard_url"]
    differ = sorted(name for name in ours if ours[name] != theirs.get(name))
    return f"settings differ: {', '.join(differ)}" if differ else None


class _LineFile:
    """One side of a socket session as `stdio_server` reads and writes it: lines of text."""

    def __init__(self, stream: ByteStream, first: bytes = b"") -> None:
        self.stream = stream
        self.first = first

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        buffered = bytearray(self.first)
        while True:
            while (end := buffered.find(b"\n")) >= 0:
                line = bytes(buffered[: end + 1])
                del buffered[: end + 1]
                yield line.decode("utf-8", errors="replace")
            try:
                buffered += await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                break
        if buffered:
            yield bytes(buffered).decode("utf-8", errors="replace")

    async def write(self, text: str) -> None:
        # A relay that went away ends the session when its read side sees the end; until
        # then what the server still says has nobody to hear it.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self.stream.send(text.encode())

    async def flush(self) -> None:
        """Nothing is buffered: every write is sent."""


async def _read_hello(stream: ByteStream) -> tuple[Any, bytes]:
    """The relay's hello line (parsed, or None) and the bytes after it."""
    buffered = bytearray()
    with anyio.fail_after(HELLO_WAIT_S):
        while b"\n" not in buffered:
            if len(buffered) > HELLO_MAX_BYTES:
                return None, b""
            buffered += await stream.receive()
    line, _, rest = bytes(buffered).partition(b"\n")
    try:
        return json.loads(line), rest
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return None, b""


def _peer(stream: ByteStream) -> tuple[int, int]:
    """The connecting process's (pid, uid), as the kernel recorded them at connect()."""
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return int(pid), int(uid)


def forgery(hello: Any, *, secret: str, pid: int) -> str | None:
    """Why `hello` is not from an `aat mcp` this server may trust, or None.

    It must carry `secret` (the contents of `run/mcp.secret`), and its `cwd` must be the
    working folder of process `pid`, the one that connected.
    """
    claimed = hello.get("secret") if isinstance(hello, dict) else None
    if not isinstance(claimed, str) or not hmac.compare_digest(claimed, secret):
        return "the hello does not carry the secret in AAT_HOME/run"
    cwd = hello.get("cwd")
    try:
        actual = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return f"the working folder of process {pid} cannot be read"
    if cwd != actual:
        return f"the hello claims a working folder that is not process {pid}'s own"
    return None


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _session_server(platform: Platform, surface: str) -> MCPServer:
    if surface == "chat":
        return build_chat_server(platform, surface=Surface.mcp_stdio)
    return build_server(platform, surface=Surface.mcp_stdio)


async def _answer(stream: ByteStream, reason: str | None) -> None:
    body = {"ok": True} if reason is None else {"ok": False, "reason": reason}
    await stream.send(json.dumps(body).encode() + b"\n")


async def serve_connection(platform: Platform, stream: ByteStream, *, secret: str) -> None:
    """Serve one relayed `aat mcp` session on `stream`, or refuse it (see the module doc)."""
    async with stream:
        pid, uid = _peer(stream)
        if uid != os.getuid():
            logger.warning("refused a local MCP connection from uid %s", uid)
            return
        try:
            hello, rest = await _read_hello(stream)
        except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError):
            return
        forged = forgery(hello, secret=secret, pid=pid)
        if forged is not None:
            # Nothing to the peer (not even why): it may be a tool trying its luck.
            logger.warning("refused a relayed aat mcp session from process %s: %s", pid, forged)
            return
        reason = refusal(platform.settings, hello)
        server = None
        if reason is None:
            try:
                server = _session_server(platform, hello["surface"])
            except ChatSurfaceError as exc:
                reason = f"chat surface: {exc}"
        if server is None:
            logger.info("an aat mcp serves in-process: %s", reason)
            with contextlib.suppress(anyio.BrokenResourceError):
                await _answer(stream, reason)
            return
        await _answer(stream, None)
        peer = LocalPeer(cwd=Path(hello["cwd"]), address=f"unix:{_user_name(uid)}")
        token = LOCAL_PEER.set(peer)
        try:
            await serve_stdio_streams(
                server,
                stdin=_LineFile(stream, rest),
                stdout=_LineFile(stream),
                drain_s=drain_time(platform.settings),
            )
        finally:
            LOCAL_PEER.reset(token)


def _take_lock(folder: Path) -> int | None:
    """The lock that makes this process the socket's one server; None if another holds it."""
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _socket_folder(home: Path) -> Path:
    folder = Path(handoff.socket_dir(str(home.expanduser().resolve())))
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)  # noqa: PTH101 - an existing folder keeps its mode otherwise
    return folder


def _new_secret(folder: Path) -> str:
    """A fresh secret for this server's hellos, in `folder/mcp.secret` (0600) before the
    socket exists, so a relay that finds the socket finds the secret that goes with it."""
    secret = secrets.token_hex(32)
    keyfiles.write(folder / handoff.SECRET_NAME, secret.encode(), mode=0o600)
    return secret


@asynccontextmanager
async def local_sessions(platform: Platform) -> AsyncIterator[Path | None]:
    """Listen on the local socket while the context is open; yields its path (None: not
    listening, because another `aat serve` for this `AAT_HOME` already does)."""
    folder = _socket_folder(platform.settings.home)
    lock = _take_lock(folder)
    if lock is None:
        logger.info("another aat serve for this AAT_HOME serves aat mcp sessions")
        yield None
        return
    path = folder / handoff.SOCKET_NAME
    try:
        secret = _new_secret(folder)
        with handoff.reachable_path(str(folder), handoff.SOCKET_NAME) as address:
            # Under the lock, a socket already there belongs to a server that is gone.
            listener = await anyio.create_unix_listener(address, mode=0o600)
        ours = path.stat().st_ino

        async def handle(stream: ByteStream) -> None:
            try:
                await serve_connection(platform, stream, secret=secret)
            except Exception:
                logger.exception("a local MCP session failed")

        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, handle)
            try:
                yield path
            finally:
                tg.cancel_scope.cancel()
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_ino == ours:
                path.unlink()
    finally:
        os.close(lock)
