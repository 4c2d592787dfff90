"""The four refusals of the token endpoint (SPEC §18): a code already used, an agent name
taken since it was allowed, a refresh token used again, an agent revoked. Each is
`400 invalid_grant`, never a 500, and a code or refresh token used twice revokes the agent
with its whole family, also when the two uses race.

The paths found inside the transaction (the second of two uses that both passed the load)
are driven step by step through the provider; the races are real: two threads post the
same code, or the same refresh token, at once to the dashboard served by uvicorn. All on
SQLite and PostgreSQL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import anyio
import httpx
import pytest
from dash_helpers import BASE, add_operator, log_in
from fastapi.testclient import TestClient
from mcp.server.auth.provider import TokenError
from mcp.shared.auth import OAuthClientInformationFull
from serving import uvicorn_in_thread
from sign_in_helpers import (
    answer,
    authorize,
    code_of,
    exchange,
    mcp_status,
    pkce,
    refresh,
    register,
    request_id,
)
from sqlmodel import select

from dashboard.app import create_app
from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import session_scope
from webplatform.store.agents import add_agent, list_agents, revoke_agent
from webplatform.store.models import AuditEvent
from webplatform.trust.authority import seal_for
from webplatform.trust.oauth import AatCode, AatRefresh, SignInProvider, Site
from webplatform.trust.oauth_clients import ClientDocuments

ROUNDS = 3  # races per test: each a fresh sign-in


@pytest.fixture
def site(settings: Settings, platform: Platform) -> Iterator[TestClient]:
    app = create_app(settings, platform=platform, embed_worker=False)
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        add_operator(platform, "alice")
        log_in(client, "alice")
        yield client


def provider_for(platform: Platform) -> SignInProvider:
    return SignInProvider(platform, site=Site(base=BASE), documents=ClientDocuments())


def agent_revoked(platform: Platform, name: str) -> bool:
    with session_scope(platform.engine) as session:
        found = {a.name: a for a in list_agents(session=session, seal=seal_for(platform))}
    return found[name].revoked_at is not None


def allowed_code(client: httpx.Client, agent: str, **extra: str) -> tuple[Any, str, str]:
    """(client information, code, PKCE verifier) of a sign-in allowed for `agent`."""
    info = register(client)
    pair = pkce()
    request = request_id(authorize(client, info["client_id"], pair, **extra))
    return info, code_of(answer(client, request, agent=agent)), pair.verifier


def test_a_code_used_by_two_requests_that_both_loaded_it(
    site: TestClient, platform: Platform
) -> None:
    info, code, _verifier = allowed_code(site, "twice")
    client = OAuthClientInformationFull.model_validate(info)
    provider = provider_for(platform)

    async def both() -> tuple[AatCode | None, AatCode | None]:
        return (
            await provider.load_authorization_code(client, code),
            await provider.load_authorization_code(client, code),
        )

    first, second = anyio.run(both)
    assert first is not None and second is not None  # neither saw the other's use
    tokens = anyio.run(provider.exchange_authorization_code, client, first)
    with pytest.raises(TokenError) as refused:
        anyio.run(provider.exchange_authorization_code, client, second)
    assert refused.value.error == "invalid_grant"
    assert "already used" in str(refused.value.error_description)
    assert agent_revoked(platform, "twice")
    assert mcp_status(site, tokens.access_token) == 401


def test_a_name_taken_after_it_was_allowed_is_invalid_grant_and_the_other_agent_stays(
    site: TestClient, platform: Platform
) -> None:
    info, code, verifier = allowed_code(site, "build-bot")
    with session_scope(platform.engine) as session:
        _row, minted = add_agent(
            session=session, name="build-bot", owner="alice", seal=seal_for(platform)
        )
    refused = exchange(site, info, code, verifier)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == "invalid_grant"
    assert "already exists" in refused.json()["error_description"]
    assert not agent_revoked(platform, "build-bot")
    assert mcp_status(site, minted) == 200


def test_a_refresh_token_used_by_two_requests_that_both_loaded_it(
    site: TestClient, platform: Platform
) -> None:
    info, code, verifier = allowed_code(site, "refresher")
    tokens = exchange(site, info, code, verifier).json()
    client = OAuthClientInformationFull.model_validate(info)
    provider = provider_for(platform)

    async def both() -> tuple[AatRefresh | None, AatRefresh | None]:
        token = tokens["refresh_token"]
        return (
            await provider.load_refresh_token(client, token),
            await provider.load_refresh_token(client, token),
        )

    first, second = anyio.run(both)
    assert first is not None and second is not None
    rotated = anyio.run(provider.exchange_refresh_token, client, first, [])
    with pytest.raises(TokenError) as refused:
        anyio.run(provider.exchange_refresh_token, client, second, [])
    assert refused.value.error == "invalid_grant"
    assert agent_revoked(platform, "refresher")
    assert mcp_status(site, rotated.access_token) == 401
    assert refresh(site, info, str(rotated.refresh_token)).json()["error"] == "invalid_grant"
    with session_scope(platform.engine) as session:
        events = session.exec(
            select(AuditEvent.detail).where(AuditEvent.event == "agent-sign-in-revoked")
        )
        assert [d for d in events if "used again" in d]


def test_an_agent_revoked_after_its_refresh_token_was_loaded(
    site: TestClient, platform: Platform
) -> None:
    info, code, verifier = allowed_code(site, "revoked-bot")
    tokens = exchange(site, info, code, verifier).json()
    client = OAuthClientInformationFull.model_validate(info)
    provider = provider_for(platform)
    loaded = anyio.run(provider.load_refresh_token, client, tokens["refresh_token"])
    assert loaded is not None
    with session_scope(platform.engine) as session:
        assert revoke_agent(session=session, name="revoked-bot", seal=seal_for(platform))
    with pytest.raises(TokenError) as refused:
        anyio.run(provider.exchange_refresh_token, client, loaded, [])
    assert refused.value.error == "invalid_grant"
    assert "is revoked" in str(refused.value.error_description)


def race(url: str, send: Any) -> list[httpx.Response]:
    """`send(client)` from two threads, each with its own connection, released together."""
    start = threading.Barrier(2)
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def one() -> None:
        with httpx.Client(base_url=url, headers=AS_BASE, timeout=30) as client:
            start.wait()
            response = send(client)
        with lock:
            answers.append(response)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return sorted(answers, key=lambda r: r.status_code)


# The served app is reached at the tests' usual address (its Host header), so the helpers'
# Origin, redirect and resource fit it as they fit the in-process app.
AS_BASE = {"Host": BASE.removeprefix("http://")}


@pytest.fixture
def served(settings: Settings, platform: Platform) -> Iterator[tuple[str, httpx.Client]]:
    """The dashboard on uvicorn in a thread, and a client logged in as alice."""
    settings = settings.model_copy(update={"allowed_hosts": AS_BASE["Host"]})
    app = create_app(
        settings, platform=Platform(settings, engine=platform.engine), embed_worker=False
    )
    add_operator(platform, "alice")
    with uvicorn_in_thread(app) as url, httpx.Client(base_url=url, headers=AS_BASE) as operator:
        log_in(operator, "alice")  # type: ignore[arg-type]
        yield url, operator


def test_two_uses_of_one_code_racing_give_one_token_and_revoke_it(
    served: tuple[str, httpx.Client], platform: Platform
) -> None:
    url, operator = served
    for round_ in range(ROUNDS):
        agent = f"raced-code-{round_}"
        info, code, verifier = allowed_code(operator, agent)
        answers = race(url, partial(exchange, info=info, code=code, verifier=verifier))
        assert [a.status_code for a in answers] == [200, 400], [a.text for a in answers]
        assert answers[1].json()["error"] == "invalid_grant"
        assert agent_revoked(platform, agent)
        assert mcp_status(operator, answers[0].json()["access_token"]) == 401


def test_two_uses_of_one_refresh_token_racing_revoke_the_family(
    served: tuple[str, httpx.Client], platform: Platform
) -> None:
    url, operator = served
    for round_ in range(ROUNDS):
        agent = f"raced-refresh-{round_}"
        info, code, verifier = allowed_code(operator, agent)
        tokens = exchange(operator, info, code, verifier).json()
        answers = race(url, partial(refresh, info=info, token=tokens["refresh_token"]))
        statuses = [a.status_code for a in answers]
        # One rotation wins; the other use, racing or after it, is a reuse.
        assert statuses == [200, 400], [a.text for a in answers]
        assert answers[1].json()["error"] == "invalid_grant"
        assert agent_revoked(platform, agent)
        for token in (tokens["access_token"], answers[0].json()["access_token"]):
            assert mcp_status(operator, token) == 401
        assert refresh(operator, info, answers[0].json()["refresh_token"]).status_code == 400
