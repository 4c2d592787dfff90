"""`aat mcp`: the bridge on stdin/stdout, where stdout carries JSON-RPC and nothing else."""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings

import anyio

from webplatform.config import Settings
from webplatform.services import Platform
from webplatform.store.models import Surface

from .server import build_server


def configure_stderr_logging(level: int = logging.WARNING) -> None:
    """Send every log record and warning to stderr, never stdout."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("aat mcp: %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
    warnings.simplefilter("default")


async def serve_stdio(platform: Platform) -> None:
    """Serve one MCP client on this process's stdin/stdout until it hangs up."""
    server = build_server(platform, surface=Surface.mcp_stdio)
    # The SDK points fd 1 at stderr while it serves, so a stray print() or a child process
    # that inherits stdout cannot corrupt the protocol stream.
    await server.run_stdio_async()


def run_stdio(settings: Settings) -> None:
    """Run the stdio bridge (blocking); used by `aat mcp`. Logs go to stderr."""
    configure_stderr_logging()
    platform = Platform(settings)
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve_stdio, platform)
