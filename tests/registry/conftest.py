"""A real registry folder in tmp_path, with helpers that write manifests, scripts and skills."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from webplatform.registry import Registry, RegistryLoader


def tool_yaml(name: str, *, action: str = "greet", extra: str = "") -> str:
    """A minimal valid manifest; `extra` is appended as more YAML lines."""
    text = f"""\
        name: {name}
        description: Says hello
        runtime: python
        entrypoint: main.py
        actions:
          - name: {action}
            description: Greet someone.
        """
    return textwrap.dedent(text) + textwrap.dedent(extra)


class RegistryDir:
    """One registry root on disk, written the way a tool author would."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def tool(
        self,
        name: str,
        manifest: str | None = None,
        *,
        kind: str = "tool",
        entrypoint: str | None = "main.py",
    ) -> Path:
        """Write ROOT/<kind>s/NAME/<kind>.yaml (dedented) and its script; return the manifest."""
        folder = self.root / f"{kind}s" / name
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{kind}.yaml"
        text = tool_yaml(name) if manifest is None else textwrap.dedent(manifest)
        path.write_text(text, encoding="utf-8")
        if entrypoint is not None:
            script = folder / entrypoint
            script.parent.mkdir(parents=True, exist_ok=True)
            script.write_text("print('{}')\n", encoding="utf-8")
        return path

    def skill(self, name: str, text: str) -> Path:
        """Write ROOT/skills/NAME/SKILL.md (dedented)."""
        folder = self.root / "skills" / name
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "SKILL.md"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    # Reached through the fixture, because test modules cannot import a conftest reliably.
    tool_yaml = staticmethod(tool_yaml)

    @staticmethod
    def touch(path: Path) -> None:
        """Move a file's mtime forward, so an edit shows even on a coarse-mtime filesystem."""
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))

    def loader(self) -> RegistryLoader:
        return RegistryLoader([self.root])

    def load(self) -> Registry:
        return self.loader().load()


@pytest.fixture
def reg(tmp_path: Path) -> RegistryDir:
    return RegistryDir(tmp_path / "registry")
