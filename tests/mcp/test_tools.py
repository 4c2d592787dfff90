"""The seven tools through the SDK's in-memory client, in both protocol eras."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp_helpers import body, connect
from mcp_types import Implementation

from webplatform.canonical import canonical_json, sha256_hex
from webplatform.mcp import build_server
from webplatform.mcp.naming import TITLES, TOOL_NAMES, TOOLS_DIGEST_META_KEY
from webplatform.platform import Platform
from webplatform.store.models import Surface

pytestmark = pytest.mark.anyio


async def test_lists_the_seven_tools_with_annotations(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert list(tools) == list(TOOL_NAMES)
    assert tools["capabilities"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["job_status"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["run_tool"].annotations.destructive_hint is False  # type: ignore[union-attr]
    assert tools["run_tool_confirmed"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["run_agent_confirmed"].annotations.read_only_hint is False  # type: ignore[union-attr]
    assert set(tools["run_tool"].input_schema["properties"]) == {"tool", "action", "args"}
    assert set(tools["run_agent"].input_schema["properties"]) == {"agent", "action", "args"}
    assert set(tools["capabilities"].input_schema["properties"]) == {
        "kind", "name", "action", "search",
    }  # fmt: skip
    assert tools["job_status"].input_schema["required"] == []
    # Clients show a title above each call (Claude Code made "Run Tool Confirmed" of the name).
    assert {n: t.title for n, t in tools.items()} == TITLES
    assert {n: t.annotations.title for n, t in tools.items()} == TITLES  # type: ignore[union-attr]


async def test_an_argument_a_client_adds_on_its_own_is_ignored(
    platform: Platform, era: str
) -> None:
    # Gemini CLI adds `wait_for_previous` to every tool's schema and sends it when its model
    # sets it; a genuinely unknown argument is still refused.
    async with connect(platform, era) as client:
        ran = await client.call_tool(
            "run_tool",
            {"tool": "hello-world", "args": {"name": "G"}, "wait_for_previous": True},
        )
        listed = await client.call_tool("capabilities", {"wait_for_previous": False})
        status = await client.call_tool(
            "job_status", {"job": body(ran)["job"], "wait_for_previous": True}
        )
        unknown = await client.call_tool(
            "run_tool", {"tool": "hello-world", "args": {"name": "G"}, "wait_for_next": True}
        )
    assert body(ran)["status"] == "succeeded", body(ran)
    assert listed.is_error is False
    assert body(status)["status"] == "succeeded"
    assert body(unknown)["status"] == "invalid"
    assert "wait_for_next" in body(unknown)["error"]


async def test_job_status_without_a_job_lists_this_clients_recent_jobs(
    platform: Platform, era: str
) -> None:
    # A client that gave up on a call (Codex cancels at its tool timeout) never saw the job id.
    async with connect(platform, era) as client:
        first = body(
            await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "1"}})
        )
        second = body(
            await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "2"}})
        )
        listed = await client.call_tool("job_status", {})
    other = Implementation(name="someone-else", version="1")
    async with connect(platform, era, client_info=other) as client:
        theirs = body(await client.call_tool("job_status", {}))
        foreign = body(await client.call_tool("job_status", {"job": first["job"]}))
    recent = body(listed)["jobs"]
    assert listed.is_error is False
    assert [j["job"] for j in recent] == [second["job"], first["job"]]
    assert recent[0]["tool"] == "hello-world" and recent[0]["state"] == "succeeded"
    assert theirs["jobs"] == [], "another client's jobs are not listed"
    assert foreign["status"] == "invalid", "nor answered"


async def test_discover_meta_carries_the_tools_digest(platform: Platform) -> None:
    server = build_server(platform, surface=Surface.mcp_stdio)
    async with Client(server, mode="auto") as client:
        discovered = client.session.discover_result
        assert discovered is not None and discovered.meta is not None
        tools = (await client.list_tools()).tools
    wire = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]
    assert discovered.meta[TOOLS_DIGEST_META_KEY] == sha256_hex(canonical_json(wire))


async def test_run_tool_succeeds_with_result(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        result = await client.call_tool(
            "run_tool", {"tool": "hello-world", "action": "greet", "args": {"name": "Zoë"}}
        )
    answer = body(result)
    assert result.is_error is False
    assert answer["status"] == "succeeded"
    assert answer["result"] == {"greeting": "Hello, Zoë!"}
    assert isinstance(answer["job"], int)


async def test_single_action_may_be_left_out(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        result = await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "A"}})
    assert body(result)["status"] == "succeeded"


async def test_irreversible_via_run_tool_is_refused_naming_confirmed(
    platform: Platform, era: str
) -> None:
    async with connect(platform, era) as client:
        result = await client.call_tool(
            "run_tool",
            {
                "tool": "outbox",
                "action": "send-message",
                "args": {"to": "a", "subject": "s", "body": "b"},
            },
        )
    answer = body(result)
    assert result.is_error is True
    assert answer["status"] == "approval_required"
    assert answer["use"] == "run_tool_confirmed"
    assert not (platform.settings.home / "outbox").exists() or not any(
        (platform.settings.home / "outbox").iterdir()
    )


@pytest.mark.parametrize(
    ("arguments", "expect"),
    [
        ({"tool": "no-such-tool"}, "unknown tool"),
        ({"tool": "hello-wrld", "args": {"name": "x"}}, "did you mean hello-world"),
        ({"tool": "../../etc/passwd"}, "is not a tool name"),
        ({"tool": "hello-world", "args": {"name": 5}}, "must be a string"),
        ({"tool": "hello-world", "args": ["name", "x"]}, "args must be a JSON object"),
        ({"tool": "hello-world", "args": "not json"}, "args must be a JSON object"),
        ({"tool": "hello-world", "args": {}}, "missing required argument 'name'"),
        ({"tool": "hello-world", "args": {"nme": "x"}}, "unknown argument 'nme'"),
        ({"tool": 7}, "needs tool"),
        ({}, "needs tool"),
        ({"tool": "hello-world", "action": ["greet"]}, "action must be a string"),
        ({"tool": "hello-world", "action": "greeet", "args": {"name": "x"}}, "no action"),
        ({"name": "hello-world"}, "unknown argument(s) 'name'"),
    ],
)
async def test_bad_calls_answer_invalid_with_a_fix(
    platform: Platform, era: str, arguments: dict[str, object], expect: str
) -> None:
    async with connect(platform, era) as client:
        result = await client.call_tool("run_tool", arguments)
        answer = body(result)
        assert result.is_error is True
        assert answer["status"] == "invalid"
        assert expect in answer["error"]
        # The server keeps answering after every bad call.
        ok = await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "x"}})
        assert body(ok)["status"] == "succeeded"


async def test_invalid_arguments_carry_schema_and_suggestions(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        result = await client.call_tool("run_tool", {"tool": "hello-world", "args": {"nme": "x"}})
    answer = body(result)
    assert answer["did_you_mean"] == {"nme": ["name"]}
    assert answer["schema"][0]["name"] == "name"
    assert answer["schema"][0]["required"] is True


async def test_unknown_mcp_tool_is_a_result_not_a_protocol_error(
    platform: Platform, era: str
) -> None:
    async with connect(platform, era) as client:
        result = await client.call_tool("run_tools", {})
        answer = body(result)
        assert result.is_error is True
        assert answer["did_you_mean"][0] == "run_tool"
        traversal = await client.call_tool("../run_tool", {})
        assert body(traversal)["status"] == "invalid"


async def test_huge_arguments_are_answered(platform: Platform, era: str) -> None:
    huge = "x" * 2_000_000
    async with connect(platform, era) as client:
        result = await client.call_tool("run_tool", {"tool": "hello-world", "args": {huge: 1}})
        answer = body(result)
        assert answer["status"] == "invalid"
        assert len(result.content[0].text) <= platform.settings.result_max_bytes + 500  # type: ignore[union-attr]
        ok = await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "x"}})
        assert body(ok)["status"] == "succeeded"


async def test_get_skill_returns_markdown(platform: Platform, era: str) -> None:
    skill = next(iter(platform.registry().skills.values()))
    async with connect(platform, era) as client:
        result = await client.call_tool("get_skill", {"name": skill.name})
        missing = await client.call_tool("get_skill", {"name": skill.name + "x"})
    assert result.is_error is False
    assert result.content[0].text == skill.body  # type: ignore[union-attr]
    assert result.structured_content == {
        "name": skill.name,
        "description": skill.description,
        "markdown": skill.body,
    }
    assert missing.is_error is True
    assert missing.structured_content["did_you_mean"] == [skill.name]  # type: ignore[index]


async def test_job_status_reports_a_finished_job(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        ran = body(
            await client.call_tool("run_tool", {"tool": "hello-world", "args": {"name": "B"}})
        )
        status = await client.call_tool("job_status", {"job": ran["job"]})
        unknown = await client.call_tool("job_status", {"job": 999_999})
        wrong = await client.call_tool("job_status", {"job": "seven"})
    assert body(status) == ran
    assert unknown.is_error is True and body(unknown)["status"] == "invalid"
    assert wrong.is_error is True and "integer job id" in body(wrong)["error"]
