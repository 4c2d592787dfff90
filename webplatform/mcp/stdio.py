"""`aat mcp`: the bridge on stdin/stdout, where stdout carries JSON-RPC and nothing else."""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings

import anyio

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store.models import Surface

from .chat import ChatSurfaceError, build_chat_server
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


async def serve_stdio(platform: Platform, *, surface: str = "generic") -> None:
    """Serve one MCP client on this process's stdin/stdout until it hangs up.

    `surface` is `generic` (the seven tools) or `chat` (the declared chat surface).
    """
    if surface == "chat":
        server = build_chat_server(platform, surface=Surface.mcp_stdio)
    else:
        server = build_server(platform, surface=Surface.mcp_stdio)
    # The SDK points fd 1 at stderr while it serves, so a stray print() or a child process
    # that inherits stdout cannot corrupt the protocol stream.
    await server.run_stdio_async()


def run_stdio(settings: Settings, *, surface: str = "generic") -> None:
    """Run the stdio bridge (blocking); used by `aat mcp`. Logs go to stderr.

    Exits with status 1 and the reason on stderr when the chat surface cannot be served.
    """
    configure_stderr_logging()
    platform = Platform(settings)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(lambda: serve_stdio(platform, surface=surface))
    except ChatSurfaceError as exc:
        sys.stderr.write(f"aat mcp --surface chat: {exc}\n")
        raise SystemExit(1) from None
