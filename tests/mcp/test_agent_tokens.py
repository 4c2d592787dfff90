"""Agent tokens on `/mcp` over real HTTP: 401 without a valid one, the token names the requester."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import body, serve_mcp
from platforms import platform_with
from pydantic import SecretStr
from sqlalchemy import text
from sqlmodel import select

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import AuditEvent, Job, JobState, session_scope, utcnow
from webplatform.store.agents import (
    AgentTokenError,
    add_agent,
    list_agents,
    revoke_agent,
    token_hash,
)
from webplatform.store.operators import add_operator
from webplatform.store.seals import FORGED_EVENT
from webplatform.trust import changes
from webplatform.trust.authority import seal_for
from webplatform.trust.permissions import ROLE_BOOK
from webplatform.trust.stepup import Change, StepUp, StepUpMethod, change_digest

pytestmark = pytest.mark.anyio

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
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def mint(platform: Platform, name: str, owner: str | None = None) -> str:
    with session_scope(platform.engine) as session:
        return add_agent(session=session, name=name, owner=owner, seal=seal_for(platform))[1]


def post(url: str, **headers: str) -> httpx.Response:
    return httpx.post(url, json=INIT, headers={**HEADERS, **headers}, timeout=10)


@contextlib.asynccontextmanager
async def client_with(url: str, token: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def test_no_token_needed_until_one_exists_then_always(platform: Platform) -> None:
    with serve_mcp(platform) as base:
        assert post(f"{base}/mcp").status_code == 200
        token = mint(platform, "build-bot")
        for path in ("/mcp", "/mcp/chat"):
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": "Bearer"},  # empty
                {"Authorization": token},  # malformed: no scheme
                {"Authorization": f"Basic {token}"},
            ):
                refused = post(f"{base}{path}", **headers)
                assert refused.status_code == 401, (path, headers)
                assert refused.headers["WWW-Authenticate"].startswith("Bearer")
                assert "AAT_AGENT_TOKEN" in refused.json()["error"]
                assert token not in refused.text
        assert post(f"{base}/mcp", Authorization=f"Bearer {token}").status_code == 200


async def test_valid_token_runs_and_names_the_requester(platform: Platform) -> None:
    with session_scope(platform.engine) as session:
        add_operator(
            session=session,
            name="ada",
            password="correct horse",
            seal=seal_for(platform),
            roles=ROLE_BOOK,
        )
    token = mint(platform, "build-bot", owner="ada")
    with serve_mcp(platform) as base:
        async with client_with(f"{base}/mcp", token) as client:
            ran = body(
                await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "T"}})
            )
            assert ran["result"] == {"greeting": "Hello, T!"}
            queued = body(
                await client.call_tool(
                    "run_tool_confirmed",
                    {"tool": "outbox", "action": "delete-messages", "args": {}},
                )
            )
    assert queued["status"] == "pending_approval"
    with session_scope(platform.engine, write=False) as session:
        jobs = {j.id: j for j in session.exec(select(Job)).all()}
        listed = list_agents(session=session, seal=seal_for(platform))
    assert {j.requested_by for j in jobs.values()} == {"build-bot"}
    assert jobs[queued["job"]].state is JobState.pending_approval
    # The client's own name is kept beside it, as the self-reported one.
    assert all(j.client and j.client != "build-bot" for j in jobs.values())
    assert listed[0].name == "build-bot" and listed[0].owner == "ada"
    assert listed[0].last_used_at is not None


async def test_revoked_token_is_refused_on_the_next_request(platform: Platform) -> None:
    token = mint(platform, "build-bot")
    keep = mint(platform, "other-bot")
    with serve_mcp(platform) as base:
        async with client_with(f"{base}/mcp", token) as client:
            assert len((await client.list_tools()).tools) == 7
            with session_scope(platform.engine) as session:
                assert revoke_agent(session=session, name="build-bot", seal=seal_for(platform))
            with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 401 its own way
                await client.list_tools()
        assert post(f"{base}/mcp", Authorization=f"Bearer {token}").status_code == 401
        assert post(f"{base}/mcp", Authorization=f"Bearer {keep}").status_code == 200
        with session_scope(platform.engine) as session:
            assert revoke_agent(session=session, name="other-bot", seal=seal_for(platform))
        # All revoked: /mcp stays closed rather than falling open again.
        assert post(f"{base}/mcp").status_code == 401


async def test_shared_mcp_token_still_works_beside_agent_tokens(mcp_settings: Settings) -> None:
    guarded = platform_with(mcp_settings, mcp_token=SecretStr("s3cret-token"))
    token = mint(guarded, "build-bot")
    with serve_mcp(guarded) as base:
        assert post(f"{base}/mcp", Authorization="Bearer s3cret-token").status_code == 200
        assert post(f"{base}/mcp", Authorization=f"Bearer {token}").status_code == 200
        assert post(f"{base}/mcp").status_code == 401
    guarded.engine.dispose()


def test_names_and_owners_are_checked(platform: Platform) -> None:
    mint(platform, "build-bot")
    seal = seal_for(platform)
    with session_scope(platform.engine) as session:
        with pytest.raises(AgentTokenError, match="already exists"):
            add_agent(session=session, name="build-bot", owner=None, seal=seal)
        with pytest.raises(AgentTokenError, match="invalid agent name"):
            add_agent(session=session, name="no spaces", owner=None, seal=seal)
        with pytest.raises(AgentTokenError, match="no operator 'ghost'"):
            add_agent(session=session, name="x", owner="ghost", seal=seal)
        assert not revoke_agent(session=session, name="nobody", seal=seal)


async def test_job_status_answers_only_the_agent_that_asked(platform: Platform) -> None:
    # Job ids are sequential: without this, one agent could read every other agent's results.
    mine, theirs = mint(platform, "build-bot"), mint(platform, "other-bot")
    with serve_mcp(platform) as base:
        async with client_with(f"{base}/mcp", mine) as client:
            ran = body(
                await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "S"}})
            )
            own = body(await client.call_tool("job_status", {"job": ran["job"]}))
            recent = body(await client.call_tool("job_status", {}))
        async with client_with(f"{base}/mcp", theirs) as client:
            foreign = await client.call_tool("job_status", {"job": ran["job"]})
            missing = await client.call_tool("job_status", {"job": ran["job"] + 1000})
            their_recent = body(await client.call_tool("job_status", {}))
    assert own["status"] == "succeeded" and own["result"] == {"greeting": "Hello, S!"}
    assert [j["job"] for j in recent["jobs"]] == [ran["job"]]
    assert foreign.is_error is True
    assert body(foreign)["status"] == "invalid"
    assert "Hello" not in str(body(foreign))
    # Another requester's job is answered exactly as one that does not exist.
    assert body(foreign)["error"].replace(str(ran["job"]), "N") == body(missing)["error"].replace(
        str(ran["job"] + 1000), "N"
    )
    assert their_recent["jobs"] == []


async def test_a_token_row_inserted_or_unrevoked_by_sql_gets_401(platform: Platform) -> None:
    keep = mint(platform, "build-bot")
    old = mint(platform, "old-bot")
    planted = "aat_" + "p" * 43
    with session_scope(platform.engine) as session:
        assert revoke_agent(session=session, name="old-bot", seal=seal_for(platform))
    with session_scope(platform.engine) as session:
        connection = session.connection()
        connection.execute(
            text(
                "INSERT INTO agent_token (name, owner, token_hash, created_at) "
                "VALUES ('planted', NULL, :hash, :at)"
            ),
            {"hash": token_hash(planted), "at": utcnow().replace(tzinfo=None)},
        )
        connection.execute(text("UPDATE agent_token SET revoked_at = NULL WHERE name = 'old-bot'"))
    with serve_mcp(platform) as base:
        for _ in range(2):
            assert post(f"{base}/mcp", Authorization=f"Bearer {planted}").status_code == 401
            assert post(f"{base}/mcp", Authorization=f"Bearer {old}").status_code == 401
        assert post(f"{base}/mcp", Authorization=f"Bearer {keep}").status_code == 200
    with session_scope(platform.engine, write=False) as session:
        forged = session.exec(select(AuditEvent).where(AuditEvent.event == FORGED_EVENT)).all()
    assert sorted(e.detail.split(":")[0] for e in forged) == [
        "agent token old-bot",
        "agent token planted",
    ]


async def test_deleting_every_token_row_does_not_open_mcp_again(platform: Platform) -> None:
    with session_scope(platform.engine) as session:
        add_operator(
            session=session,
            name="ada",
            password="correct horse",
            seal=seal_for(platform),
            roles=ROLE_BOOK,
        )
    # Minted on the Agents page, with the admin's step-up for this name.
    digest = change_digest(operator="ada", change=Change.agent_add, target={"name": "bot"})
    step_up = StepUp(operator="ada", digest=digest, method=StepUpMethod.password)
    _row, token = changes.mint_agent(platform=platform, step_up=step_up, by="ada", name="bot")
    with session_scope(platform.engine) as session:
        session.connection().execute(text("DELETE FROM agent_token"))
    with serve_mcp(platform) as base:
        assert post(f"{base}/mcp").status_code == 401
        assert post(f"{base}/mcp", Authorization=f"Bearer {token}").status_code == 401
