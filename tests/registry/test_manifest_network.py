"""The manifest's `network:` key (SPEC §17): what loads, and the one-line errors with their line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from webplatform.registry import RegistryLoader
from webplatform.registry.cache import ManifestCache
from webplatform.registry.model import NetworkReach

if TYPE_CHECKING:
    from tests.registry.conftest import RegistryDir

HEAD = "name: t\ndescription: d\nruntime: python\nentrypoint: main.py\n"
ACTIONS = "actions:\n  - name: greet\n"


def manifest(network: str) -> str:
    return f"{HEAD}network: {network}\n{ACTIONS}"


@pytest.mark.parametrize(
    ("network", "reach", "shown"),
    [
        (None, NetworkReach(), "none"),
        ("none", NetworkReach(), "none"),
        ("any", NetworkReach(any=True), "any"),
        ("{connect: [443, 5432]}", NetworkReach(connect=(443, 5432)), "connect 443, 5432"),
        ("{bind: [8080]}", NetworkReach(bind=(8080,)), "bind 8080"),
        (
            "{connect: [443], bind: [8080]}",
            NetworkReach(connect=(443,), bind=(8080,)),
            "connect 443; bind 8080",
        ),
    ],
)
def test_network_loads_as_written(
    reg: RegistryDir, network: str | None, reach: NetworkReach, shown: str
) -> None:
    reg.tool("t", HEAD + ACTIONS if network is None else manifest(network))
    registry = reg.load()
    assert not registry.errors, [str(e) for e in registry.errors]
    assert registry.tools["t"].network == reach
    assert str(registry.tools["t"].network) == shown
    # Declared ports share the host's network, where Landlock governs TCP alone: pages say so.
    udp_open = bool(reach.connect or reach.bind)
    assert registry.tools["t"].network.shown() == (
        f"{shown} (UDP not restricted)" if udp_open else shown
    )


@pytest.mark.parametrize(
    ("network", "words"),
    [
        ("anyy", ["network 'anyy' is not known", "did you mean 'any'"]),
        ("internet", ["network 'internet' is not known", "{connect: [443]}"]),
        ("true", ["`network` must be none, any, or ports"]),
        ("[443]", ["`network` must be none, any, or ports"]),
        ("{}", ["`network` must be none, any, or ports"]),
        ("{conect: [443]}", ["unknown key 'conect' in `network`", "did you mean 'connect'"]),
        ("{connect: 443}", ["`network.connect` must be a list of TCP ports"]),
        ("{connect: []}", ["`network.connect` must be a list of TCP ports"]),
        ("{bind: [0]}", ["`network.bind` entry 0 is not a TCP port (1 to 65535)"]),
        ("{connect: [70000]}", ["entry 70000 is not a TCP port"]),
        ("{connect: ['443']}", ["entry '443' is not a TCP port"]),
        ("{connect: [true]}", ["entry True is not a TCP port"]),
        ("{connect: [443, 443]}", ["port 443 is listed twice in `network.connect`"]),
    ],
)
def test_a_wrong_network_is_one_line_on_its_own_line(
    reg: RegistryDir, network: str, words: list[str]
) -> None:
    reg.tool("t", manifest(network))
    registry = reg.load()
    assert "t" not in registry.tools
    (error,) = registry.errors
    assert error.line == 5, str(error)
    assert "\n" not in error.message
    for word in words:
        assert word in error.message, error.message


@pytest.mark.parametrize(
    ("network", "reach"),
    [
        ("any", NetworkReach(any=True)),
        ("{connect: [443], bind: [8080]}", NetworkReach(connect=(443,), bind=(8080,))),
    ],
)
def test_network_is_read_back_from_the_registry_cache(
    reg: RegistryDir, tmp_path: Path, network: str, reach: NetworkReach
) -> None:
    """A cold start takes the tool's reach from the signed JSON cache as it was declared."""
    reg.tool("t", manifest(network))
    cache = tmp_path / "cache"
    RegistryLoader([reg.root], cache_dir=cache).load()
    [entry] = ManifestCache(cache, [reg.root]).read().values()
    assert entry.tool is not None and entry.tool.network == reach
    assert RegistryLoader([reg.root], cache_dir=cache).load().tools["t"].network == reach
