"""Revocations every host sees (SPEC §24), attacked by a database writer.

Three hosts (own AAT_HOME each, the others trusting the first's decision key) on one
PostgreSQL database, each serving `/mcp`. A token revoked on one host and put back by SQL is
refused on every host; an entry of the revocation chain deleted or rewritten by SQL makes a
host that saw it stop deciding, saying so in one line.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from mcp_helpers import serve_mcp
from sqlalchemy import text

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import session_scope
from webplatform.store.agents import add_agent, revoke_agent
from webplatform.trust import signing
from webplatform.trust.authority import seal_for

pytestmark = pytest.mark.postgresql

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


@pytest.fixture
def hosts(pg_settings: Settings, tmp_path: Path) -> Iterator[list[tuple[Platform, str]]]:
    """Three hosts on one database, each with its `/mcp` URL; the first's key signs."""
    first = Platform(pg_settings)
    public = signing.signer_for(pg_settings.home).public_line
    platforms = [first]
    for n in (1, 2):
        home = tmp_path / f"host{n}-home"
        settings = pg_settings.model_copy(update={"home": home, "decision_public_key": public})
        platforms.append(Platform(settings))
    with ExitStack() as stack:
        urls = [stack.enter_context(serve_mcp(p)) + "/mcp" for p in platforms]
        yield list(zip(platforms, urls, strict=True))
    for platform in platforms:
        platform.engine.dispose()


def _status(url: str, token: str) -> int:
    r = httpx.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token}"})
    return r.status_code


def _mint(platform: Platform, name: str) -> str:
    with session_scope(platform.engine) as session:
        return add_agent(session=session, name=name, owner=None, seal=seal_for(platform))[1]


def _sql(platform: Platform, statement: str, **params: object) -> list[tuple[object, ...]]:
    with session_scope(platform.engine) as session:
        result = session.connection().execute(text(statement), params)
        return [tuple(row) for row in result] if result.returns_rows else []


def test_a_token_revoked_on_one_host_and_put_back_by_sql_is_refused_on_every_host(
    hosts: list[tuple[Platform, str]],
) -> None:
    (first, _), (second, second_url), (third, third_url) = hosts
    token = _mint(first, "build-bot")
    assert [_status(url, token) for _p, url in hosts] == [200, 200, 200]
    (before,) = _sql(first, "SELECT revoked_at, signature FROM agent_token")
    # Revoked on the second host (its own key signs the revoked row).
    with session_scope(second.engine) as session:
        assert revoke_agent(session=session, name="build-bot", seal=seal_for(second))
    _sql(first, "UPDATE agent_token SET revoked_at = :r, signature = :s", r=before[0], s=before[1])
    assert [_status(url, token) for _p, url in hosts] == [401, 401, 401]
    assert _status(third_url, token) == 401 and _status(second_url, token) == 401


def _broken_after(
    hosts: list[tuple[Platform, str]], attack: str, caplog: pytest.LogCaptureFixture
) -> None:
    (first, first_url), (second, _), _third = hosts
    kept = _mint(first, "kept-bot")
    for name in ("old-bot", "older-bot"):
        _mint(first, name)
        with session_scope(first.engine) as session:
            assert revoke_agent(session=session, name=name, seal=seal_for(first))
    # Every host has read the chain (two entries) and keeps its head.
    assert [_status(url, kept) for _p, url in hosts] == [200, 200, 200]
    rows = _sql(first, "SELECT id, fingerprint FROM revocation ORDER BY id")
    assert len(rows) == 2
    if attack == "delete":
        _sql(first, "DELETE FROM revocation WHERE id = :i", i=rows[-1][0])
    else:  # rewrite the first entry and every hash after it, as a careful writer would
        prev = "0" * 64
        for n, (row_id, fingerprint) in enumerate(rows):
            value = "0" * 64 if n == 0 else fingerprint
            digest = hashlib.sha256(f"{prev}\n{value}".encode()).hexdigest()
            _sql(
                first,
                "UPDATE revocation SET fingerprint = :f, prev_hash = :p, hash = :h WHERE id = :i",
                f=value,
                p=prev,
                h=digest,
                i=row_id,
            )
            prev = digest
    with caplog.at_level(logging.ERROR, logger="webplatform.trust.revocation_chain"):
        assert [_status(url, kept) for _p, url in hosts] == [401, 401, 401]
    said = [r.getMessage() for r in caplog.records if "revocation record" in r.getMessage()]
    assert len(said) == 3, said  # once per host, one line each
    assert all("\n" not in line and "decides nothing" in line for line in said)
    assert _status(first_url, kept) == 401  # and it stays stopped
    del second


def test_a_chain_entry_deleted_by_sql_stops_every_host_deciding(
    hosts: list[tuple[Platform, str]], caplog: pytest.LogCaptureFixture
) -> None:
    _broken_after(hosts, "delete", caplog)


def test_a_chain_entry_rewritten_by_sql_stops_every_host_deciding(
    hosts: list[tuple[Platform, str]], caplog: pytest.LogCaptureFixture
) -> None:
    _broken_after(hosts, "rewrite", caplog)
