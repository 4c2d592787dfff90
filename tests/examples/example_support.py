"""Helpers for the example-registry tests: manifests to ToolSpecs without the registry loader."""

from __future__ import annotations

from collections.abc import Callable

import yaml

from webplatform.config import EXAMPLES_ROOT
from webplatform.process import outcome
from webplatform.registry.model import ActionSpec, ArgSpec, ToolSpec

RunExample = Callable[..., outcome.RunResult]


def load_example(kind: str, name: str) -> ToolSpec:
    """A ToolSpec straight from the shipped manifest, without the registry loader."""
    folder = EXAMPLES_ROOT / f"{kind}s" / name
    manifest = folder / f"{kind}.yaml"
    raw = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    actions = tuple(
        ActionSpec(
            name=a["name"],
            description=a["description"],
            read_only=a.get("read_only", False),
            reversible=a.get("reversible"),
            timeout_s=a.get("timeout_s"),
            args=tuple(
                ArgSpec(
                    name=g["name"],
                    type=g["type"],
                    required=g.get("required", False),
                    default=g.get("default"),
                )
                for g in a.get("args") or ()
            ),
            output_schema=a.get("output_schema"),
        )
        for a in raw["actions"]
    )
    return ToolSpec(
        kind="agent" if kind == "agent" else "tool",
        name=raw["name"],
        description=raw["description"],
        version=raw["version"],
        runtime=raw["runtime"],
        entrypoint=raw["entrypoint"],
        folder=folder,
        manifest_path=manifest,
        secrets=tuple(raw.get("secrets") or ()),
        actions=actions,
        reads=tuple(raw.get("reads") or ()),
        writes=tuple(raw.get("writes") or ()),
        warm=bool(raw.get("warm", False)),
    )
