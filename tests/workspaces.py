"""Where a test keeps AAT_HOME: beside its `tmp_path`, which is the test's workspace (SPEC §14)."""

from __future__ import annotations

from pathlib import Path


def aat_home_beside(tmp_path: Path) -> Path:
    """An AAT_HOME next to `tmp_path`, not inside it: a workspace may not contain AAT_HOME."""
    return tmp_path.parent / f"{tmp_path.name}-aat-home"
