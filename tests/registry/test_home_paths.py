"""What a manifest may name inside AAT_HOME (SPEC §19): only data folders of tools, at
`aat check` (`$AAT_HOME/...` as written) and again when the tool runs (the real AAT_HOME)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from webplatform.process import confine
from webplatform.registry.model import ToolSpec

if TYPE_CHECKING:
    from tests.registry.conftest import RegistryDir

FORBIDDEN = ["$AAT_HOME", "$AAT_HOME/cache", "$AAT_HOME/run", "$AAT_HOME/decision-key.pem"]
ALLOWED = ["$AAT_HOME/outbox", "$AAT_HOME/data/mine", "$AAT_HOME/data/mine/sub"]


def _manifest(reg: RegistryDir, key: str, path: str) -> str:
    return reg.tool_yaml("greedy", extra=f"{key}: ['{path}']\n")


@pytest.mark.parametrize("key", ["reads", "writes"])
@pytest.mark.parametrize("path", FORBIDDEN)
def test_the_loader_refuses_aats_own_folders_and_files(
    reg: RegistryDir, key: str, path: str
) -> None:
    reg.tool("greedy", _manifest(reg, key, path))
    registry = reg.load()
    assert "greedy" not in registry.tools
    [error] = registry.errors
    assert error.line == 8
    assert error.message.startswith(f"`{key}: {path}` is ")
    assert "$AAT_HOME/outbox or $AAT_HOME/data/<tool>" in error.message


@pytest.mark.parametrize("key", ["reads", "writes"])
@pytest.mark.parametrize("path", ALLOWED)
def test_data_folders_of_tools_are_allowed(reg: RegistryDir, key: str, path: str) -> None:
    reg.tool("greedy", _manifest(reg, key, path))
    registry = reg.load()
    assert not registry.errors
    assert getattr(registry.tools["greedy"], key) == (path,)


def _spec(tmp_path: Path, key: str, path: str) -> ToolSpec:
    folder = tmp_path / "registry" / "tools" / "greedy"
    folder.mkdir(parents=True, exist_ok=True)
    spec = ToolSpec(
        kind="tool",
        name="greedy",
        description="x",
        version="1",
        runtime="python",
        entrypoint="main.py",
        folder=folder,
        manifest_path=folder / "tool.yaml",
    )
    return ToolSpec(**{**spec.__dict__, key: (path,)})


@pytest.mark.parametrize("key", ["reads", "writes"])
@pytest.mark.parametrize("name", ["cache", "run", "decision-key.pem"])
def test_a_tool_naming_the_real_aat_home_by_its_path_is_not_run(
    tmp_path: Path, key: str, name: str
) -> None:
    """A manifest that writes AAT_HOME out in full passes `aat check` (which does not know
    this host's AAT_HOME) and is refused when the tool is to run."""
    home = tmp_path / "aat-home"
    (home / "cache").mkdir(parents=True)
    (home / "run").mkdir()
    (home / "decision-key.pem").write_text("key")
    fence = confine.Fence(home=home)
    with pytest.raises(confine.NotStarted) as refused:
        confine.lock(_spec(tmp_path, key, str(home / name)), fence, None)
    assert str(refused.value).startswith(
        f"greedy: `{key}: {home / name}` is in AAT_HOME but in no data"
    )


@pytest.mark.parametrize("key", ["reads", "writes"])
def test_a_data_folder_that_links_back_into_aat_home_is_not_run(tmp_path: Path, key: str) -> None:
    home = tmp_path / "aat-home"
    (home / "cache").mkdir(parents=True)
    (home / "data").mkdir()
    os.symlink(home / "cache", home / "data" / "greedy")
    spec = _spec(tmp_path, key, "$AAT_HOME/data/greedy")
    with pytest.raises(confine.NotStarted, match="is in AAT_HOME but in no data folder"):
        confine.lock(spec, confine.Fence(home=home), None)


def test_a_data_folder_is_granted(tmp_path: Path) -> None:
    home = tmp_path / "aat-home"
    fence = confine.Fence(home=home)
    jail = confine.lock(_spec(tmp_path, "writes", "$AAT_HOME/data/greedy"), fence, None)
    assert isinstance(jail, confine.Jail), jail
    with jail:
        assert jail.paths is not None and str(home / "data" / "greedy") in jail.paths["write"]
