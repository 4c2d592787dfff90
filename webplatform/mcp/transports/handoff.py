"""`aat mcp` handing its session to a running `aat serve`: a byte relay, standard library only.

Importing the MCP SDK, pydantic and SQLAlchemy takes an `aat mcp` process over a second and
about 100 MB; a client with a short connect timeout gives up on its first message before
that. So `aat mcp` first looks for a running `aat serve` for the same `AAT_HOME` and, when
one listens on its local socket (`AAT_HOME/run/mcp.sock`, 0600 in a 0700 folder) and agrees
that it would serve this session exactly as `aat mcp` would in-process, relays bytes between
its stdin/stdout and that socket. The server speaks MCP over it with the SDK's own stdio
transport (`webplatform.mcp.transports.local`); nothing here reads a JSON-RPC message.

The exchange before the MCP stream, one JSON line each way:

- the relay's hello: `{"aat_handoff": VERSION, "secret": ..., "env": {...}, "cwd": ...,
  "surface": ...}`, where `secret` is what the server wrote to `AAT_HOME/run/mcp.secret`
  when it started (proof that the sender may read AAT_HOME, which no tool may), `cwd` is
  this process's working folder (the server checks it against `/proc/PID/cwd`), and `env`
  holds this process's `AAT_*` variables with `--registry`/`--db` applied, paths (a SQLite
  file's too) made absolute, secret values replaced by their sha256 and tokens left out;
- the server's answer: `{"ok": true}`, or `{"ok": false, "reason": ...}` and a hang-up; a
  hello without the secret or with a folder not its sender's own gets a hang-up alone.

Anything else (no socket or no secret, a stale socket, another OS user's server, a server
for another home, registry or database, a refusal, a server too slow to answer) and
`relay()` returns None: the caller serves in-process, exactly as before (where a confined
tool has no access to aat's database, so it gets nothing either way).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import struct
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from webplatform import __version__

HANDOFF_VERSION = 2  # 2: the hello carries the secret from `run/mcp.secret`
SOCKET_DIR = "run"
SOCKET_NAME = "mcp.sock"
SECRET_NAME = "mcp.secret"
# A Unix socket path longer than this cannot be bound or reached by name (sun_path).
MAX_SOCKET_PATH = 100
# The server answers the hello in milliseconds; one that does not within this is sick, and
# serving in-process is the better bet.
HELLO_TIMEOUT_S = 3.0
# Variables that carry secrets: compared by digest, never sent.
SECRET_VARS = ("AAT_DB_URL", "AAT_NOTIFY")
# Variables of the caller alone (the `--url` mode's), never sent.
PRIVATE_VARS = ("AAT_AGENT_TOKEN", "AAT_MCP_TOKEN", "AAT_MCP_URL")
PATH_VARS = ("AAT_HOME",)
PATH_LIST_VARS = ("AAT_REGISTRY", "AAT_WORKSPACES")
DEFAULT_HOME = "~/.local/share/aat"
CHUNK = 65536


def digest(value: str) -> str:
    """How a secret setting travels in the hello: its sha256, hex."""
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


def absolute_db_url(url: str) -> str:
    """`url` with a relative SQLite file path made absolute from this process's folder, as
    SQLAlchemy opens it; any other URL unchanged. A relative path names a different database
    in each folder, so the relay and the server compare it this way."""
    scheme, sep, rest = url.partition(":///")
    if not sep or scheme.partition("+")[0] != "sqlite":
        return url
    path, query_sep, query = rest.partition("?")
    if not path or path == ":memory:" or path.startswith("file:") or os.path.isabs(path):
        return url
    return f"{scheme}:///{os.path.abspath(path)}{query_sep}{query}"


def home_of(env: Mapping[str, str]) -> str:
    """`AAT_HOME` as an absolute path (the same default as `webplatform.config`)."""
    return _absolute(env.get("AAT_HOME") or DEFAULT_HOME)


def socket_dir(home: str) -> str:
    """The owner-only folder in `AAT_HOME` that holds the socket."""
    return os.path.join(home, SOCKET_DIR)


@contextlib.contextmanager
def reachable_path(folder: str, name: str) -> Iterator[str]:
    """A path to `folder/name` short enough for a Unix socket address.

    A long `AAT_HOME` is reached through a descriptor of the folder (`/proc/self/fd/N/name`),
    which Linux resolves for bind and connect alike.
    """
    full = os.path.join(folder, name)
    if len(full.encode()) <= MAX_SOCKET_PATH:
        yield full
        return
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def parse_mcp_args(args: Sequence[str]) -> dict[str, Any] | None:
    """`aat mcp`'s options, read without argparse: surface, registry folders, database, URL.

    None for anything else (`--help`, a typo): the full command line handles those.
    """
    found: dict[str, Any] = {"surface": "generic", "registry": [], "db": None, "url": None}
    items = list(args)
    while items:
        item = items.pop(0)
        name, eq, value = item.partition("=")
        if name not in ("--surface", "--registry", "--db", "--url"):
            return None
        if not eq:
            if not items:
                return None
            value = items.pop(0)
        if name == "--registry":
            found["registry"].append(value)
        elif name == "--surface":
            if value not in ("generic", "chat"):
                return None
            found["surface"] = value
        else:
            found[name.removeprefix("--")] = value
    return found


def hello_env(environ: Mapping[str, str], options: Mapping[str, Any]) -> dict[str, str]:
    """This process's `AAT_*` settings as the hello carries them (see the module docstring)."""
    env = {k.upper(): v for k, v in environ.items() if k.upper().startswith("AAT_")}
    if options["registry"]:
        env["AAT_REGISTRY"] = ":".join(options["registry"])
    if options["db"]:
        env["AAT_DB_URL"] = options["db"]
    if env.get("AAT_DB_URL"):
        env["AAT_DB_URL"] = absolute_db_url(env["AAT_DB_URL"])
    for name in PRIVATE_VARS:
        env.pop(name, None)
    for name in SECRET_VARS:
        if env.get(name):
            env[name] = digest(env[name])
        else:
            env.pop(name, None)
    for name in PATH_VARS:
        if env.get(name):
            env[name] = _absolute(env[name])
    for name in PATH_LIST_VARS:
        if env.get(name, "").strip():
            env[name] = ":".join(_absolute(p) for p in env[name].split(":") if p.strip())
    return env


def _connect(home: str) -> socket.socket | None:
    """A connection to this OS user's `aat serve` for `home`, or None."""
    folder = socket_dir(home)
    try:
        info = os.stat(os.path.join(folder, SOCKET_NAME))
    except OSError:
        return None
    if info.st_uid != os.getuid():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with reachable_path(folder, SOCKET_NAME) as path:
            sock.connect(path)  # a stale socket (its server killed) refuses at once
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            raise OSError("the socket's server runs as another OS user")
    except OSError:
        sock.close()
        return None
    return sock


def read_secret(home: str) -> str | None:
    """The running server's hello secret (`run/mcp.secret`, this OS user's), or None."""
    path = os.path.join(socket_dir(home), SECRET_NAME)
    try:
        with open(path, encoding="ascii") as handle:
            if os.fstat(handle.fileno()).st_uid != os.getuid():
                return None
            return handle.read().strip() or None
    except (OSError, ValueError):
        return None


def _handshake(sock: socket.socket, hello: dict[str, Any]) -> bytes | None:
    """Send the hello, read the answer; the bytes after it (MCP already), or None if refused."""
    sock.settimeout(HELLO_TIMEOUT_S)
    try:
        sock.sendall(json.dumps(hello).encode() + b"\n")
        buffered = b""
        while b"\n" not in buffered:
            chunk = sock.recv(CHUNK)
            if not chunk or len(buffered) > CHUNK:
                return None
            buffered += chunk
    except OSError:
        return None
    line, _, rest = buffered.partition(b"\n")
    try:
        answer = json.loads(line)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("ok") is not True:
        return None
    sock.settimeout(None)
    return rest


def _pump_stdin(sock: socket.socket) -> None:
    """The client's bytes to the server; at the client's EOF, half-close so the session ends."""
    with contextlib.suppress(OSError):
        while chunk := os.read(0, CHUNK):
            sock.sendall(chunk)
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def _pump_socket(sock: socket.socket, first: bytes) -> bool:
    """The server's bytes to the client until the server hangs up; False if stdout closed."""
    try:
        data = first
        while True:
            view = memoryview(data)
            while view:
                view = view[os.write(1, view) :]
            data = sock.recv(CHUNK)
            if not data:
                return True
    except BrokenPipeError:
        return False
    except OSError:
        return True


def relay(args: Sequence[str], environ: Mapping[str, str] | None = None) -> int | None:
    """Relay this `aat mcp` (its arguments `args`) to a matching `aat serve`; the exit code.

    None when no matching server takes the session: the caller serves it in-process.
    """
    environ = os.environ if environ is None else environ
    options = parse_mcp_args(args)
    if options is None or options["url"] or environ.get("AAT_MCP_URL"):
        return None
    home = home_of(environ)
    secret = read_secret(home)
    sock = _connect(home) if secret is not None else None
    if sock is None:
        return None
    hello = {
        "aat_handoff": HANDOFF_VERSION,
        "secret": secret,
        "version": __version__,
        "env": hello_env(environ, options),
        "cwd": os.getcwd(),
        "surface": options["surface"],
    }
    first = _handshake(sock, hello)
    if first is None:
        sock.close()
        return None
    feeder = threading.Thread(target=_pump_stdin, args=(sock,), name="aat-relay-in", daemon=True)
    feeder.start()
    _pump_socket(sock, first)
    sock.close()
    feeder.join(timeout=0.5)  # the client's own EOF ends the session: that is a clean end
    if feeder.is_alive():
        # The server hung up while the client was still talking: it stopped or was killed.
        sys.stderr.write(
            "aat mcp: the aat serve that served this session stopped; restart the MCP client "
            "(jobs already queued keep their state: ask job_status once it is back)\n"
        )
        return 1
    return 0
