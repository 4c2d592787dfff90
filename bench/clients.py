"""Connecting to bridges as an MCP client would: the SDK's `Client` over stdio."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

from bench.common import PYTHON, ROOT, aat_argv, aat_env


def aat_mcp(home: Path, **env: str) -> AbstractAsyncContextManager[Client]:
    """A legacy-era SDK client on a fresh `aat mcp` process with AAT_HOME=`home`."""
    return stdio_client(aat_argv("mcp"), home, env)


@asynccontextmanager
async def stdio_client(argv: list[str], home: Path, env: dict[str, str]) -> AsyncIterator[Client]:
    """A legacy-era SDK client on a fresh `argv` (`aat mcp`, or a bench side's variant of it)
    with AAT_HOME=`home` and `env` added."""
    # The caller's folder is the call's workspace (SPEC §14): a project folder of its own,
    # never the repository (it holds the registry) nor a folder around AAT_HOME.
    work = home.with_name(f"{home.name}-work")
    work.mkdir(exist_ok=True)
    params = StdioServerParameters(
        command=argv[0], args=argv[1:], env=aat_env(home, **env), cwd=str(work)
    )
    async with Client(params, mode="legacy") as client:
        yield client


@asynccontextmanager
async def minimal_mcp() -> AsyncIterator[Client]:
    """An SDK client on the minimal one-tool `MCPServer` (bench/minimal_server.py)."""
    params = StdioServerParameters(
        command=PYTHON,
        args=["-m", "bench.minimal_server"],
        env=aat_env(Path("/tmp")),
        cwd=str(ROOT),
    )
    async with Client(params, mode="legacy") as client:
        yield client


def body(result: CallToolResult) -> dict[str, Any]:
    """The JSON body of a tool result."""
    text = result.content[0].text  # type: ignore[union-attr]
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def child_pids(marker: str) -> list[int]:
    """Pids of this process's children whose command line contains `marker`."""
    mine = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = stat.rsplit(")", 1)[1].split()[1]
        if ppid == mine and marker in cmdline:
            found.append(int(entry.name))
    return found


def server_pid(marker: str, home: Path | None = None) -> int:
    """The pid of this process's child server whose command line contains `marker` (and,
    given `home`, whose AAT_HOME is `home`)."""
    for pid in child_pids(marker):
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if home is None or f"AAT_HOME={home}".encode() in environ:
            return pid
    raise LookupError(f"no child server {marker!r} for {home}")
