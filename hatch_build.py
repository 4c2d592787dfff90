"""Build hook: a built wheel carries the top-level templates/ and static/ inside `dashboard`.

Only for a standard wheel. An editable install must not copy them into site-packages: a
stale copy there would shadow the checkout's files (dashboard/assets.py looks inside the
package first), and hatchling would switch to import-hook editables.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class AssetsHook(BuildHookInterface):  # type: ignore[type-arg]
    """Maps templates/ and static/ into dashboard/ for standard wheels only."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version != "standard":
            return
        for name in ("templates", "static"):
            build_data["force_include"][f"{self.root}/{name}"] = f"dashboard/{name}"
