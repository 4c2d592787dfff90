"""`aat servers import FILE` (SPEC §22): MCP clients' server lists as `server.yaml` files.

Reads an `mcpServers` object (Claude Desktop, Claude Code's `.mcp.json`, Cursor, Gemini CLI's
settings) or opencode's `mcp` block, and writes `ROOT/servers/NAME/server.yaml` for each
server, saying what it guessed about the server's reach. A secret's value is never copied:
an environment variable that holds one (or refers to one, `${VAR}`) becomes a declared
secret, read from the environment or the keyring when the server starts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_SECRETISH = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASS|AUTH|CREDENTIAL|PAT\b", re.I)
_REFERENCE = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
_BEARER = re.compile(r"^Bearer\s+(.+)$", re.I)
# Launchers that fetch the server on first run: they need the network and their cache.
_FETCHERS = {
    "npx": "~/.npm",
    "bunx": "~/.bun",
    "pnpm": "~/.local/share/pnpm",
    "uvx": "~/.cache/uv",
    "uv": "~/.cache/uv",
    "pipx": "~/.local/pipx",
}


class ImportProblem(Exception):
    """A file that holds no server list aat can read; the message is one line."""


@dataclass(frozen=True)
class Imported:
    """One server written: its name, its file, and what was guessed (one line each)."""

    name: str
    path: Path
    guesses: tuple[str, ...]


def import_file(source: Path, root: Path) -> list[Imported]:
    """Write one `server.yaml` under `root/servers/` per server in `source`; what was
    written. A server whose folder already exists is left alone and said so."""
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ImportProblem(f"cannot read {source} as JSON ({exc})") from exc
    entries = _entries(data)
    written: list[Imported] = []
    for raw_name, entry in entries.items():
        name = re.sub(r"[^a-z0-9]+", "-", str(raw_name).lower()).strip("-") or "server"
        folder = root / "servers" / name
        if folder.exists():
            path = folder / "server.yaml"
            written.append(Imported(name, path, (f"{folder} exists already; left as it is",)))
            continue
        doc, guesses = server_document(
            name, entry if isinstance(entry, dict) else {}, source.parent
        )
        folder.mkdir(parents=True)
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
        (folder / "server.yaml").write_text(text, encoding="utf-8")
        written.append(Imported(name, folder / "server.yaml", tuple(guesses)))
    return written


def _entries(data: Any) -> dict[str, Any]:
    if isinstance(data, dict):
        for key in ("mcpServers", "mcp", "servers"):
            block = data.get(key)
            if isinstance(block, dict):
                return block
    raise ImportProblem("no `mcpServers` (or opencode's `mcp`) object in the file")


def server_document(
    name: str, entry: dict[str, Any], project: Path
) -> tuple[dict[str, Any], list[str]]:
    """The `server.yaml` of one client entry (read from a file in folder `project`), and
    what was guessed about it."""
    doc: dict[str, Any] = {"name": name, "description": f"{name} (imported)"}
    guesses: list[str] = []
    url = entry.get("url") or entry.get("httpUrl") or entry.get("serverUrl")
    if isinstance(url, str):
        doc["url"] = url
        secret = _bearer_secret(name, entry.get("headers"), guesses)
        if secret:
            doc["auth"] = {"bearer_secret": secret}
        if entry.get("type") == "sse":
            guesses.append("the client used SSE; aat speaks streamable HTTP to this url")
        return doc, guesses
    command = _command(entry)
    if not command:
        guesses.append("no command or url: edit `command:` before using it")
        command = ["true"]
    doc["command"] = [_as_workspace(arg, project, guesses) for arg in command]
    env, secrets = _environment(entry.get("env") or entry.get("environment") or {}, guesses)
    if env:
        doc["env"] = env
    if secrets:
        doc["secrets"] = secrets
    doc |= _reach(doc["command"], guesses)
    return doc, guesses


def _command(entry: dict[str, Any]) -> list[str]:
    raw = entry.get("command")
    args = entry.get("args") or []
    command = list(raw) if isinstance(raw, list) else [raw] if isinstance(raw, str) else []
    return [str(x) for x in (*command, *args) if isinstance(x, str | int | float)]


def _as_workspace(arg: str, project: Path, guesses: list[str]) -> str:
    """`$WORKSPACE` for an argument naming the project folder the file is in (a project's
    `.mcp.json` means the project: through aat, the caller's workspace), else `arg`."""
    if arg in (".", "./") or (arg.startswith("/") and Path(arg) == project.resolve()):
        guesses.append(f"{arg} is the project folder: $WORKSPACE (the caller's workspace)")
        return "$WORKSPACE"
    return arg


def _environment(raw: Any, guesses: list[str]) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in raw.items() if isinstance(raw, dict) else ():
        text = str(value)
        reference = _REFERENCE.match(text)
        if reference or _SECRETISH.search(str(key)):
            secrets.append(str(key))
            source = reference.group(1) if reference else key
            guesses.append(
                f"{key} is a secret: its value is not copied; set {key} in aat's "
                f"environment or keyring (the client took it from {source})"
            )
        else:
            env[str(key)] = text
    return env, secrets


def _bearer_secret(name: str, headers: Any, guesses: list[str]) -> str | None:
    value = headers.get("Authorization") if isinstance(headers, dict) else None
    if not isinstance(value, str):
        return None
    token = _BEARER.match(value.strip())
    reference = _REFERENCE.match(token.group(1)) if token else None
    secret = reference.group(1) if reference else f"{name.upper().replace('-', '_')}_TOKEN"
    guesses.append(f"the bearer token is the secret {secret}: set it in aat's environment")
    return secret


def _reach(command: list[str], guesses: list[str]) -> dict[str, Any]:
    """What the server's process may reach, guessed from its command: a launcher that
    fetches packages needs the network and its cache; folders named in its arguments are
    the ones it serves (the caller's workspace is always writable)."""
    reach: dict[str, Any] = {"network": "none"}
    launcher = Path(command[0]).name
    writes: list[str] = []
    if launcher in _FETCHERS:
        reach["network"] = "any"
        writes.append(_FETCHERS[launcher])
        guesses.append(f"{launcher} fetches the server: network any, writes {writes[0]}")
    reads: list[str] = []
    for arg in command[1:]:
        path = Path(arg).expanduser()
        if not arg.startswith(("/", "~")):
            continue
        if path.is_dir():
            writes.append(arg)
            guesses.append(f"{arg} is a folder it serves: writes {arg}")
        elif path.is_file() and str(path.parent) not in reads:
            reads.append(str(path.parent))
            guesses.append(f"{arg} is a file it runs or reads: reads {path.parent}")
    if reads:
        reach["reads"] = reads
    if reach["network"] == "none":
        guesses.append("network none: add `network: any` if it calls out")
    if writes:
        reach["writes"] = writes
    return reach
