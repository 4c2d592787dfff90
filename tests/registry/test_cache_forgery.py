"""The registry cache that every new aat process reads (SPEC §19): a file put in its place
is ignored and rebuilt, never run and never believed."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

from webplatform.registry import RegistryLoader
from webplatform.registry import cache as cache_module

if TYPE_CHECKING:
    from tests.registry.conftest import RegistryDir

IRREVERSIBLE = """\
    name: mailer
    description: Sends mail
    runtime: python
    entrypoint: main.py
    actions:
      - name: send-mail
        description: Send one message.
    """


class _CreatesAFile:
    """Unpickling this runs `open(path, "w")`: what a pickle payload does."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.path), "w"))


def _cache_file(folder: Path) -> Path:
    [path] = folder.glob("registry-*.json")
    return path


def test_a_pickle_put_in_the_caches_place_runs_nothing(reg: RegistryDir, tmp_path: Path) -> None:
    reg.tool("alpha")
    cache = tmp_path / "cache"
    RegistryLoader([reg.root], cache_dir=cache).load()
    path = _cache_file(cache)
    marker = tmp_path / "the-payload-ran"
    payload = pickle.dumps({"format": 2, "entries": _CreatesAFile(marker)})
    path.write_bytes(payload)
    # The name the pickle cache had, too: nothing reads it any more.
    path.with_suffix(".pickle").write_bytes(payload)
    loaded = RegistryLoader([reg.root], cache_dir=cache).load()
    assert not marker.exists()
    assert sorted(loaded.tools) == ["alpha"] and not loaded.errors
    assert path.read_bytes().startswith(cache_module.MAGIC)  # rebuilt
    assert not path.with_suffix(".pickle").exists()  # and the old name cleared


def test_even_signed_with_the_key_a_pickle_runs_nothing(reg: RegistryDir, tmp_path: Path) -> None:
    """The second wall: the file is JSON, so one that somebody signed with a leaked key is
    still only data."""
    reg.tool("alpha")
    cache = tmp_path / "cache"
    RegistryLoader([reg.root], cache_dir=cache).load()
    path = _cache_file(cache)
    marker = tmp_path / "the-payload-ran"
    payload = pickle.dumps({"format": 2, "entries": _CreatesAFile(marker)})
    key = (tmp_path / cache_module.KEY_FILE).read_bytes()
    mac = hmac.new(key, payload, hashlib.sha256).hexdigest().encode()
    path.write_bytes(cache_module.MAGIC + b" " + mac + b"\n" + payload)
    loaded = RegistryLoader([reg.root], cache_dir=cache).load()
    assert not marker.exists()
    assert sorted(loaded.tools) == ["alpha"] and not loaded.errors


def test_an_edited_entry_without_the_key_is_not_believed(reg: RegistryDir, tmp_path: Path) -> None:
    """An attacker who can write the cache but not read the key cannot make an irreversible
    action read-only: the edit breaks the HMAC, and the manifest is parsed again."""
    reg.tool("mailer", IRREVERSIBLE)
    cache = tmp_path / "cache"
    first = RegistryLoader([reg.root], cache_dir=cache).load()
    assert first.tools["mailer"].actions[0].read_only is False
    path = _cache_file(cache)
    head, _, body = path.read_bytes().partition(b"\n")
    document = json.loads(body)
    [entry] = document["entries"].values()
    action = entry[4][9][0]  # Entry.tool -> ToolSpec.actions -> the first ActionSpec
    assert action[0] == "send-mail" and action[2] is False
    action[2] = True  # read_only
    path.write_bytes(head + b"\n" + json.dumps(document).encode())
    loaded = RegistryLoader([reg.root], cache_dir=cache).load()
    assert loaded.tools["mailer"].actions[0].read_only is False


def test_a_key_others_can_read_is_not_used(reg: RegistryDir, tmp_path: Path) -> None:
    reg.tool("mailer", IRREVERSIBLE)
    cache = tmp_path / "cache"
    RegistryLoader([reg.root], cache_dir=cache).load()
    key = tmp_path / cache_module.KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600
    os.chmod(key, 0o644)
    entries = cache_module.ManifestCache(cache, [reg.root]).read()
    assert entries == {}
