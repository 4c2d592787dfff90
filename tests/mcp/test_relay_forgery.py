"""The relay socket trusts nothing a tool could say (SPEC §19): a hello needs the secret in
`AAT_HOME/run` and must claim its sender's own working folder, or it gets nothing at all.

A real `local_sessions` listener in this process, a real confined tool (tests/tools/escape)
and real sockets; the hello is otherwise the one `aat mcp` would send, so only the secret or
the folder stands between it and a session. In its namespaces (SPEC §17) a tool does not see
the socket at all; run with Landlock alone (`AAT_UNCONFINED=namespaces`) it reaches the
socket by its path, and the secret is what refuses it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from workspaces import aat_home_beside

import webplatform
from webplatform.config import Settings
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.mcp.transports import handoff
from webplatform.mcp.transports.local import local_sessions, refusal
from webplatform.platform import Actor, Platform
from webplatform.store.models import Surface

pytestmark = pytest.mark.anyio
TESTS = Path(__file__).resolve().parents[1]
TOOL = TESTS / "tools" / "escape"


@asynccontextmanager
async def _serving(tmp_path: Path, **confinement: Any) -> AsyncIterator[tuple[Platform, Path]]:
    """A platform on the test registry and its local relay socket, listening."""
    home = aat_home_beside(tmp_path)
    settings = Settings(home=home, registry=str(TESTS), workspaces=str(tmp_path), **confinement)
    platform = Platform(settings)
    try:
        async with local_sessions(platform) as path:
            assert path is not None
            yield platform, path
    finally:
        platform.engine.dispose()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Platform, Path]]:
    """The relay of a platform whose tools run in namespaces of their own."""
    async with _serving(tmp_path) as serving:
        yield serving


@pytest.fixture
async def served_landlock_alone(tmp_path: Path) -> AsyncIterator[tuple[Platform, Path]]:
    """The relay of a platform whose tools run with Landlock alone, as where namespaces are
    missing and the operator set AAT_UNCONFINED=namespaces."""
    alone = {"unconfined": "namespaces", "confine_pretend_no_namespaces": True}
    async with _serving(tmp_path, **alone) as serving:
        yield serving


def _hello(platform: Platform, **fields: object) -> dict[str, object]:
    """The hello `aat mcp` sends for `platform`'s settings, less the secret and the folder."""
    settings = platform.settings
    env = {
        "AAT_HOME": str(settings.home),
        "AAT_REGISTRY": str(TESTS),
        "AAT_WORKSPACES": settings.workspaces,
        "AAT_UNCONFINED": settings.unconfined,
        "AAT_CONFINE_PRETEND_NO_NAMESPACES": str(int(settings.confine_pretend_no_namespaces)),
    }
    options = handoff.parse_mcp_args([])
    assert options is not None
    hello: dict[str, object] = {
        "aat_handoff": handoff.HANDOFF_VERSION,
        "version": webplatform.__version__,
        "env": handoff.hello_env(env, options),
        "surface": "generic",
    }
    # Everything a server compares agrees: a refusal could only come from the new checks.
    assert refusal(settings, {**hello, "cwd": "/"}) is None
    return {**hello, **fields}


async def _ask(path: Path, hello: dict[str, object]) -> bytes:
    """Send `hello` from this process; the first line the server answers (b"": hang-up)."""
    with handoff.reachable_path(str(path.parent), path.name) as address:
        stream = await anyio.connect_unix(address)
    async with stream:
        await stream.send(json.dumps(hello).encode() + b"\n")
        answer = b""
        with anyio.fail_after(10):
            while b"\n" not in answer:
                try:
                    answer += await stream.receive()
                except anyio.EndOfStream:
                    break
    return answer.partition(b"\n")[0]


def _secret(platform: Platform) -> str:
    return (platform.settings.home / "run" / handoff.SECRET_NAME).read_text()


def _relay_from_a_tool(platform: Platform) -> dict[str, Any]:
    """What the escape tool, run as an agent's call, got from the relay with a hello that
    lacks only the secret (it adds that if it can read it, and its own folder as `cwd`)."""
    answer = request_run(
        platform=platform,
        call=RunCall(
            kind="tool", name="escape", action="relay", args={"hello": json.dumps(_hello(platform))}
        ),
        actor=Actor(surface=Surface.mcp_stdio, client="test-agent"),
        consent=Consent.NONE,
    )
    assert answer.status.value == "succeeded", answer
    result: dict[str, Any] = answer.result  # type: ignore[assignment]
    return result


async def test_a_tool_in_its_namespaces_does_not_see_the_relay(
    served: tuple[Platform, Path], caplog: pytest.LogCaptureFixture
) -> None:
    platform, path = served
    with caplog.at_level(logging.WARNING, logger="webplatform.mcp.transports.local"):
        result = await anyio.to_thread.run_sync(_relay_from_a_tool, platform)
    # AAT_HOME is not in the tool's view: neither the secret nor the socket is there.
    assert result == {
        "secret": "No such file or directory",
        "answer": "no connection: No such file or directory",
    }
    assert caplog.records == []  # nothing reached the server
    assert path.exists()  # though the socket is there, outside the tool's view


async def test_a_tool_with_landlock_alone_reaches_the_relay_and_gets_no_session(
    served_landlock_alone: tuple[Platform, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """Landlock does not govern connecting to a socket by its path: the secret refuses it."""
    platform, _path = served_landlock_alone
    with caplog.at_level(logging.WARNING, logger="webplatform.mcp.transports.local"):
        result = await anyio.to_thread.run_sync(_relay_from_a_tool, platform)
    assert result["secret"] == "Permission denied"  # confinement never grants AAT_HOME/run
    assert result["answer"] == ""  # not even a refusal to read
    refused = [r.getMessage() for r in caplog.records]
    assert len(refused) == 1 and refused[0].startswith("refused a relayed aat mcp session from")
    assert refused[0].endswith("the hello does not carry the secret in AAT_HOME/run")


async def test_a_hello_without_the_secret_gets_nothing(served: tuple[Platform, Path]) -> None:
    platform, path = served
    assert await _ask(path, _hello(platform, cwd=os.getcwd())) == b""
    wrong = _hello(platform, cwd=os.getcwd(), secret="0" * 64)
    assert await _ask(path, wrong) == b""


async def test_a_hello_claiming_a_folder_not_its_own_gets_nothing(
    served: tuple[Platform, Path], tmp_path: Path
) -> None:
    """Even with the secret (a process that can read AAT_HOME), the workspace it gets is the
    folder it is in, never one it names."""
    platform, path = served
    assert Path.cwd() != tmp_path
    claimed = _hello(platform, secret=_secret(platform), cwd=str(tmp_path))
    assert await _ask(path, claimed) == b""
    own = _hello(platform, secret=_secret(platform), cwd=os.getcwd())
    assert json.loads(await _ask(path, own)) == {"ok": True}


def test_the_secret_is_the_owners_alone(tmp_path: Path) -> None:
    """`read_secret` is what `aat mcp` sends: the file's contents, only from its own user."""
    run = tmp_path / "run"
    run.mkdir()
    assert handoff.read_secret(str(tmp_path)) is None
    (run / handoff.SECRET_NAME).write_text("abc\n")
    assert handoff.read_secret(str(tmp_path)) == "abc"
