"""Rules deciding calls in advance (SPEC §16), as an agent sees them through the real SDK
client: `allow` runs an irreversible call at once and says which rule allowed it, `deny`
refuses it naming the rule, `ask` queues even a reversible call; the worker checks the
rule again before it starts anything (a rule revoked or spent meanwhile runs nothing)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from mcp_helpers import body, connect
from sqlalchemy import text

from webplatform.jobs import ruling
from webplatform.jobs.tracking import pending_for
from webplatform.platform import Platform
from webplatform.trust import rulebook
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio

SEND = {
    "tool": "outbox",
    "action": "send-message",
    "args": {"to": "ops@example.org", "subject": "weekly", "body": "hi"},
}


def keep(platform: Platform, source: str) -> list[int]:
    ids = rulebook.add(platform, rulebook.parse(rulebook.Source(source), platform), by="ada")
    ruling.forget(platform)
    return ids


def patient(platform: Platform) -> None:
    platform.settings = platform.settings.model_copy(update={"approval_wait_s": 10.0})


def outbox(platform: Platform) -> list[Any]:
    folder = platform.settings.home / "outbox"
    return sorted(folder.iterdir()) if folder.exists() else []


ALLOW = (
    "effect: allow\ntool: outbox\naction: send-message\nargs: {to: '*@example.org'}\n"
    "expires_in: 1h\nmax_runs: 1\n"
)


async def test_an_allow_rule_runs_the_call_at_once_and_names_itself(
    platform: Platform, worker: Worker, era: str
) -> None:
    patient(platform)
    (rule,) = keep(platform, ALLOW)
    async with connect(platform, era) as client:
        answer = body(await client.call_tool("run_tool_confirmed", SEND))
        assert answer["status"] == "succeeded", answer
        assert answer["allowed_by"]["rule"] == rule and answer["allowed_by"]["by"] == "ada"
        assert answer["allowed_by"]["expires_at"]
        status = body(await client.call_tool("job_status", {"job": answer["job"]}))
        assert status["allowed_by"]["rule"] == rule
        # Plain run_tool still refuses an irreversible action, rule or not.
        plain = body(await client.call_tool("run_tool", SEND))
        assert plain["status"] == "approval_required", plain
        # Its budget (max_runs 1) is spent: the next call waits for an operator as usual.
        platform.settings = platform.settings.model_copy(update={"approval_wait_s": 0.5})
        again = body(await client.call_tool("run_tool_confirmed", SEND))
    assert again["status"] == "pending_approval" and "allowed_by" not in again, again
    assert len(outbox(platform)) == 1


async def test_a_deny_rule_refuses_naming_the_rule(platform: Platform, era: str) -> None:
    (rule,) = keep(platform, "effect: deny\ntool: outbox\naction: send-message")
    async with connect(platform, era) as client:
        answer = body(await client.call_tool("run_tool_confirmed", SEND))
    assert answer["status"] == "refused" and f"refused by rule {rule}" in answer["error"]
    assert outbox(platform) == [] and not pending_for(platform=platform)


async def test_an_ask_rule_queues_a_reversible_call(platform: Platform, era: str) -> None:
    platform.settings = platform.settings.model_copy(update={"approval_wait_s": 0.5})
    keep(platform, "effect: ask\ntool: hello-world\naction: greet")
    async with connect(platform, era) as client:
        answer = body(
            await client.call_tool(
                "run_tool", {"tool": "hello-world", "action": "greet", "args": {"name": "x"}}
            )
        )
    assert answer["status"] == "pending_approval", answer
    assert [p["tool"] for p in pending_for(platform=platform)] == ["hello-world"]


async def test_a_rule_revoked_before_the_worker_starts_the_call_runs_nothing(
    platform: Platform, era: str
) -> None:
    (rule,) = keep(platform, ALLOW.replace("max_runs: 1", "max_runs: 5"))
    async with connect(platform, era) as client:
        answer = body(await client.call_tool("run_tool_confirmed", SEND))
    assert answer["status"] in ("approved", "running", "pending_approval"), answer
    assert answer["allowed_by"]["rule"] == rule
    rulebook.revoke(platform, rule, by="ada")
    worker = Worker(platform=platform, settings=platform.settings, load_registry=platform.registry)
    thread, stop = worker.start_thread()
    try:
        deadline = time.monotonic() + 20
        state = ""
        while time.monotonic() < deadline:
            with platform.engine.connect() as conn:
                state, error = conn.execute(
                    text("SELECT state, error FROM job WHERE id = :id"), {"id": answer["job"]}
                ).one()
            if state not in ("approved", "running"):
                break
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert state == "failed" and f"rule {rule} was revoked by ada" in error
    assert outbox(platform) == []
