"""The manifest's `limits:` key (SPEC §20): what loads, the one-line errors with their line,
and the `AAT_MAX_*` ceilings the loader holds it to."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from webplatform.config import Settings
from webplatform.registry import RegistryLoader
from webplatform.registry.cache import ManifestCache
from webplatform.registry.limits import ceilings
from webplatform.registry.model import ToolLimits

if TYPE_CHECKING:
    from tests.registry.conftest import RegistryDir

HEAD = "name: t\ndescription: d\nruntime: python\nentrypoint: main.py\n"
ACTIONS = "actions:\n  - name: greet\n"


def manifest(limits: str) -> str:
    return f"{HEAD}limits: {limits}\n{ACTIONS}"


@pytest.mark.parametrize(
    ("limits", "loaded"),
    [
        (None, ToolLimits(processes=64, memory_mb=512, file_mb=256, open_files=256)),
        ("{processes: 8}", ToolLimits(processes=8)),
        (
            "{processes: 200, memory_mb: 2048, file_mb: 1024, open_files: 4096}",
            ToolLimits(processes=200, memory_mb=2048, file_mb=1024, open_files=4096),
        ),
    ],
)
def test_limits_load_as_written(reg: RegistryDir, limits: str | None, loaded: ToolLimits) -> None:
    reg.tool("t", HEAD + ACTIONS if limits is None else manifest(limits))
    registry = reg.load()
    assert not registry.errors, [str(e) for e in registry.errors]
    assert registry.tools["t"].limits == loaded


@pytest.mark.parametrize(
    ("limits", "words"),
    [
        ("64", ["`limits` must be a mapping such as `limits: {processes: 64"]),
        ("{procs: 8}", ["unknown key 'procs' in `limits`", "did you mean 'processes'"]),
        ("{processes: 0}", ["`limits.processes` must be a positive whole number, not 0"]),
        ("{memory_mb: -5}", ["`limits.memory_mb` must be a positive whole number, not -5"]),
        ("{file_mb: 1.5}", ["`limits.file_mb` must be a positive whole number, not 1.5"]),
        ("{open_files: '256'}", ["`limits.open_files` must be a positive whole number, not '256'"]),
        ("{processes: true}", ["`limits.processes` must be a positive whole number, not True"]),
    ],
)
def test_a_wrong_limit_is_one_line_on_its_own_line(
    reg: RegistryDir, limits: str, words: list[str]
) -> None:
    reg.tool("t", manifest(limits))
    registry = reg.load()
    assert "t" not in registry.tools
    (error,) = registry.errors
    assert error.line == 5, str(error)
    assert "\n" not in error.message
    for word in words:
        assert word in error.message, error.message


def test_a_limit_above_its_ceiling_is_a_manifest_error(reg: RegistryDir, tmp_path: Path) -> None:
    reg.tool("t", manifest("{memory_mb: 4096, open_files: 100}"))
    settings = Settings(home=tmp_path / "home", max_memory_mb=2048)
    registry = RegistryLoader([reg.root], ceilings=ceilings(settings)).load()
    assert "t" not in registry.tools
    (error,) = registry.errors
    assert error.line == 5, str(error)
    assert error.message == (
        "`limits.memory_mb: 4096` is above its ceiling of 2048 (AAT_MAX_MEMORY_MB); "
        "lower it, or the operator raises the setting"
    )
    raised = Settings(home=tmp_path / "home", max_memory_mb=4096)
    loaded = RegistryLoader([reg.root], ceilings=ceilings(raised)).load()
    assert loaded.tools["t"].limits.memory_mb == 4096


def test_limits_are_read_back_from_the_registry_cache(reg: RegistryDir, tmp_path: Path) -> None:
    reg.tool("t", manifest("{processes: 9, file_mb: 3}"))
    cache = tmp_path / "cache"
    RegistryLoader([reg.root], cache_dir=cache).load()
    [entry] = ManifestCache(cache, [reg.root]).read().values()
    assert entry.tool is not None and entry.tool.limits == ToolLimits(processes=9, file_mb=3)
    loaded = RegistryLoader([reg.root], cache_dir=cache).load()
    assert loaded.tools["t"].limits == ToolLimits(processes=9, file_mb=3)
