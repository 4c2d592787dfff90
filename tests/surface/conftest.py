"""Fixtures for the chat surface tests (defined in surface_helpers, shared with the modules)."""

from surface_helpers import anyio_backend, base_url, chat_settings, root  # noqa: F401
