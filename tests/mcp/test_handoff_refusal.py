"""Whether `aat serve` takes a relayed `aat mcp` session: only when it would serve exactly what
the relay would serve in-process (here without processes: the hello and the refusal)."""

from __future__ import annotations

from pathlib import Path

import pytest

import webplatform
from webplatform.config import Settings
from webplatform.mcp.transports import handoff
from webplatform.mcp.transports.local import _read_hello, refusal


def _hello(env: dict[str, str]) -> dict[str, object]:
    options = handoff.parse_mcp_args([])
    assert options is not None
    return {
        "aat_handoff": handoff.HANDOFF_VERSION,
        "version": webplatform.__version__,
        "env": handoff.hello_env(env, options),
        "cwd": str(Path.cwd()),
        "surface": "generic",
    }


def test_a_relative_sqlite_path_is_the_same_database_only_from_the_same_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    env = {"AAT_HOME": str(home), "AAT_DB_URL": "sqlite:///aat-relative.db"}
    server = Settings(home=home, db_url="sqlite:///aat-relative.db")
    (tmp_path / "serve").mkdir()
    (tmp_path / "elsewhere").mkdir()

    monkeypatch.chdir(tmp_path / "serve")
    assert refusal(server, _hello(env)) is None  # the same file: served
    monkeypatch.chdir(tmp_path / "elsewhere")
    other = _hello(env)  # this aat mcp would open elsewhere/aat-relative.db
    monkeypatch.chdir(tmp_path / "serve")
    assert refusal(server, other) == "settings differ: db_url"
    # The hello never carries the URL itself, relative or absolute.
    assert "aat-relative.db" not in repr(other)


class _Lines:
    """The receiving end of a relay's connection, already holding what it sent."""

    def __init__(self, data: bytes) -> None:
        self.chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]

    async def receive(self) -> bytes:
        return self.chunks.pop(0)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "line",
    [b"[" * 100_000 + b"\n", b"not json\n"],
    ids=["nested past the parser's depth", "not JSON"],
)
async def test_a_hello_that_cannot_be_read_is_refused_quietly(line: bytes) -> None:
    """A malformed hello is refused (None), not logged as a crash with a traceback."""
    hello, rest = await _read_hello(_Lines(line + b"more"))  # type: ignore[arg-type]
    assert hello is None and rest == b""
