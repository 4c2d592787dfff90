"""`aat agent add|list|revoke` as a user runs them: real processes, a real SQLite file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from serving import aat_env, aat_serve, free_port

pytestmark = pytest.mark.integration  # runs the aat command line

AAT = [sys.executable, "-m", "webplatform"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return aat_env(tmp_path / "home")


def aat(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AAT, *args], env=env, input=stdin, capture_output=True, text=True, timeout=60
    )


def test_add_prints_only_the_token_and_stores_only_its_hash(
    env: dict[str, str], tmp_path: Path
) -> None:
    assert (
        aat(env, "operator", "add", "ada", "--password-stdin", stdin="correct horse\n").returncode
        == 0
    )
    added = aat(env, "agent", "add", "build-bot", "--owner", "ada")
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    assert added.stdout == token + "\n" and token.startswith("aat_") and len(token) > 40
    assert "shown once" in added.stderr
    database = (tmp_path / "home" / "aat.db").read_bytes()
    assert token.encode() not in database
    with sqlite3.connect(tmp_path / "home" / "aat.db") as db:
        assert db.execute("SELECT count(*) FROM agent_token").fetchone() == (1,)

    listed = aat(env, "agent", "list")
    assert listed.returncode == 0
    header, row = listed.stdout.splitlines()
    assert header.split()[:3] == ["NAME", "OWNER", "CREATED"] and "REVOKED" in header
    assert row.split()[:2] == ["build-bot", "ada"] and row.endswith("-")
    assert token not in listed.stdout

    assert aat(env, "agent", "revoke", "build-bot").returncode == 0
    assert not aat(env, "agent", "list").stdout.splitlines()[1].endswith(" -")
    again = aat(env, "agent", "revoke", "build-bot")
    assert again.returncode == 1 and "no active agent 'build-bot'" in again.stderr


def test_bad_input_is_one_line(env: dict[str, str]) -> None:
    ghost = aat(env, "agent", "add", "bot", "--owner", "ghost")
    assert ghost.returncode == 2 and ghost.stdout == ""
    assert ghost.stderr.strip().count("\n") == 0 and "no operator 'ghost'" in ghost.stderr
    nameless = aat(env, "agent", "add")
    assert nameless.returncode == 2 and "give the agent's NAME" in nameless.stderr
    assert aat(env, "agent", "add", "bot").returncode == 0
    taken = aat(env, "agent", "add", "bot")
    assert taken.returncode == 2 and "already exists" in taken.stderr and taken.stdout == ""


def test_serve_beyond_loopback_accepts_an_active_agent_token(
    env: dict[str, str], tmp_path: Path
) -> None:
    """`aat serve --host 0.0.0.0` refuses without a bearer token for /mcp; an active agent
    token is one (then /mcp answers 401 without it); a revoked one is not."""
    bare = aat(env, "serve", "--host", "0.0.0.0", "--port", str(free_port()))
    assert bare.returncode == 2 and "refusing to listen on 0.0.0.0" in bare.stderr
    assert "aat agent add NAME" in bare.stderr and "AAT_MCP_TOKEN" in bare.stderr
    token = aat(env, "agent", "add", "bot").stdout.strip()
    with aat_serve(
        env=env, port=free_port(), log=tmp_path / "serve.log", args=("--host", "0.0.0.0")
    ) as url:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        refused = httpx.post(f"{url}/mcp", json=hello, timeout=10)
        assert refused.status_code == 401
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.post(f"{url}/mcp", json=hello, headers=headers, timeout=10).status_code != 401
    assert aat(env, "agent", "revoke", "bot").returncode == 0
    revoked = aat(env, "serve", "--host", "0.0.0.0", "--port", str(free_port()))
    assert revoked.returncode == 2 and "refusing to listen on 0.0.0.0" in revoked.stderr
