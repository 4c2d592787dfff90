"""Platforms a test makes besides the `platform` fixture (tests/conftest.py)."""

from __future__ import annotations

from typing import Any

from webplatform.config import Settings
from webplatform.platform import Platform


def platform_with(settings: Settings, **changes: Any) -> Platform:
    """Another platform on the same home and database, with some settings changed."""
    return Platform(settings.model_copy(update=changes))
