"""Where `aat mcp` logs: stderr only, since stdout carries the protocol."""

from __future__ import annotations

import logging
import sys
import warnings


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
