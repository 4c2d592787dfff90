"""Helpers for the chat surface tests: a copy of the example registry to break, clients."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp_types import CallToolResult
from serving import uvicorn_in_thread

from dashboard.app import create_app
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.platform import Platform
from webplatform.registry import RegistryLoader
from webplatform.registry.model import Registry
from webplatform.surface import DECLARATION_FILE

# The two protocol eras, as `Client(mode=...)` spells them.
ERAS = ["legacy", "2026-07-28"]
EXAMPLE_NAMES = [
    "demo_hello-world_greet",
    "mail_outbox_list-messages",
    "office_xlsx_dump",
    "office_xlsx_list-sheets",
    "office_xlsx_read-sheet",
    "text_summarize",
]

# argv: `main.py ACTION [--arg value ...]`; answers with what it was asked.
TOOL_MAIN = """
import json, sys
print(json.dumps({"action": sys.argv[1], "argv": sys.argv[2:]}))
"""


@pytest.fixture
def anyio_backend() -> str:
    """The SDK runs on asyncio here."""
    return "asyncio"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A private copy of the example registry, with its chat_surface.yaml, to edit freely.

    It lies beside `tmp_path`, the test's workspace: a workspace may not overlap a registry.
    """
    target = tmp_path.parent / f"{tmp_path.name}-registry"
    shutil.copytree(EXAMPLES_ROOT, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def chat_settings(settings: Settings, root: Path) -> Settings:
    """The test's settings (own AAT_HOME and database) on the registry copy."""
    return settings.model_copy(update={"registry": str(root)})


@pytest.fixture
def base_url(chat_settings: Settings) -> Iterator[str]:
    with serve(chat_settings) as url:
        yield url


def load_registry(root: Path) -> Registry:
    """The registry under `root`, freshly loaded."""
    return RegistryLoader([root]).load()


def edit_yaml(path: Path, change: Any) -> None:
    """Load a YAML file, let `change(data)` edit it in place, write it back."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def edit_manifest(root: Path, tool: str, change: Any, kind: str = "tools") -> None:
    """Edit one manifest of the registry copy."""
    name = "tool.yaml" if kind == "tools" else "agent.yaml"
    edit_yaml(root / kind / tool / name, change)


def edit_declaration(root: Path, change: Any) -> None:
    """Edit the registry copy's chat_surface.yaml."""
    edit_yaml(root / DECLARATION_FILE, change)


def action(data: dict[str, Any], name: str) -> dict[str, Any]:
    """The action called `name` in a manifest's data."""
    found: dict[str, Any] = next(a for a in data["actions"] if a["name"] == name)
    return found


def add_tool(root: Path, name: str, actions: list[str], read_only: bool = True) -> None:
    """A small python tool with the given (argument-free) actions."""
    folder = root / "tools" / name
    folder.mkdir(parents=True)
    (folder / "main.py").write_text(TOOL_MAIN, encoding="utf-8")
    manifest = {
        "name": name,
        "description": f"test tool {name}",
        "version": "0.1.0",
        "runtime": "python",
        "entrypoint": "main.py",
        "actions": [
            {"name": a, "description": f"does {a}", "read_only": read_only, "args": []}
            for a in actions
        ],
    }
    (folder / "tool.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")


def publish(root: Path, namespace: str, entry: dict[str, Any]) -> None:
    """Add one published tool to the declaration."""
    edit_declaration(root, lambda d: d["namespaces"].setdefault(namespace, []).append(entry))


def body(result: CallToolResult) -> dict[str, Any]:
    """The JSON body of a tool result, checking that text and structuredContent agree."""
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


@contextlib.contextmanager
def serve(settings: Settings) -> Iterator[str]:
    """The real dashboard app (`aat serve`) on uvicorn in a thread; yields its base URL."""
    platform = Platform(settings)
    app = create_app(settings, platform=platform, embed_worker=False)
    try:
        with uvicorn_in_thread(app) as base:
            yield base
    finally:
        platform.engine.dispose()
