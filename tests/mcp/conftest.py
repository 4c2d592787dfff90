"""Fixtures for the MCP bridge tests (defined in mcp_helpers, shared with the test modules)."""

from mcp_helpers import (  # noqa: F401
    anyio_backend,
    era,
    mcp_settings,
    platform_settings,
    quick_progress,
    quick_queue_watch,
    registry_root,
    worker,
)
