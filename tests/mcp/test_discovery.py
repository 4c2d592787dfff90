"""`capabilities`: narrowest first, the size-based degrade, registry errors, call shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_helpers import body, connect
from platforms import platform_with

from webplatform.config import Settings
from webplatform.platform import Platform

pytestmark = pytest.mark.anyio

ACTIONS = 420
SCRIPT = """import json, sys
print(json.dumps({"action": sys.argv[1], "args": sys.argv[2:]}))
"""


def write_big_tool(root: Path) -> None:
    """A generated tool with 420 actions (list-credentials, list-sheets, ... among them)."""
    folder = root / "tools" / "bigcloud"
    folder.mkdir(parents=True)
    (folder / "main.py").write_text(SCRIPT)
    lines = [
        "name: bigcloud",
        "description: A generated tool with very many actions.",
        "version: 1.0.0",
        "runtime: python",
        "entrypoint: main.py",
        "actions:",
        "  - name: list-credentials",
        "    description: List the stored credentials.",
        "    read_only: true",
        "    args:",
        "      - {name: max-results, type: integer, description: At most this many}",
        "  - name: list-sheets",
        "    description: List the sheets of a workbook.",
        "    read_only: true",
        "    args:",
        "      - {name: workspace-id, type: string, required: true, description: Workspace}",
    ]
    for i in range(ACTIONS - 2):
        lines += [
            f"  - name: get-widget-{i}",
            f"    description: Fetch widget number {i} with all of its properties and history.",
            "    read_only: true",
            "    args:",
            "      - {name: workspace-id, type: string, required: true, description: Workspace}",
            "      - {name: max-results, type: integer, description: At most this many results}",
        ]
    (folder / "tool.yaml").write_text("\n".join(lines) + "\n")


@pytest.fixture
def big_platform(mcp_settings: Settings, registry_root: Path) -> Platform:
    write_big_tool(registry_root)
    broken = registry_root / "tools" / "broken"
    broken.mkdir()
    (broken / "tool.yaml").write_text("name: broken\nactions: [\n")
    return platform_with(mcp_settings, registry=str(registry_root))


async def test_empty_call_lists_everything_compactly(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        result = await client.call_tool("capabilities", {})
    answer = body(result)
    names = {t["name"] for t in answer["tools"]}
    assert {"hello-world", "outbox", "xlsx"} <= names
    hello = next(t for t in answer["tools"] if t["name"] == "hello-world")
    assert hello["actions"] == 1 and hello["ready"] is True
    assert answer["agents"] and answer["skills"]
    assert "args" not in json.dumps(answer["tools"])


async def test_name_and_action_give_args_and_call_shape(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        result = await client.call_tool(
            "capabilities", {"name": "outbox", "action": "send-message"}
        )
    answer = body(result)
    assert answer["reversibility"] == "irreversible"
    assert [a["name"] for a in answer["args"]][:3] == ["to", "subject", "body"]
    assert answer["call"]["tool"] == "run_tool_confirmed"
    assert answer["call"]["arguments"]["tool"] == "outbox"
    assert set(answer["call"]["arguments"]["args"]) >= {"to", "subject", "body"}


async def test_kind_filters_and_bad_kind_is_invalid(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        skills = body(await client.call_tool("capabilities", {"kind": "skill"}))
        bad = await client.call_tool("capabilities", {"kind": "tools"})
        wrong_type = await client.call_tool("capabilities", {"name": 5})
    assert set(skills) >= {"skills"} and "tools" not in skills
    assert bad.is_error is True and "kind must be one of" in body(bad)["error"]
    assert wrong_type.is_error is True


async def test_big_tool_degrades_to_action_index(big_platform: Platform, era: str) -> None:
    async with connect(big_platform, era) as client:
        result = await client.call_tool("capabilities", {"name": "bigcloud"})
        text = result.content[0].text  # type: ignore[union-attr]
        answer = body(result)
        assert answer["degraded"] is True and answer["network"] == "none"
        assert len(answer["actions"]) == ACTIONS
        assert "action=" in answer["note"] and "search=" in answer["note"]
        assert len(text.encode()) <= big_platform.settings.capabilities_max_bytes
        one = body(
            await client.call_tool("capabilities", {"name": "bigcloud", "action": "get-widget-7"})
        )
        assert [a["name"] for a in one["args"]] == ["workspace-id", "max-results"]


async def test_small_limit_degrades_even_small_tools(mcp_settings: Settings, era: str) -> None:
    tiny = platform_with(mcp_settings, capabilities_max_bytes=200)
    async with connect(tiny, era) as client:
        answer = body(await client.call_tool("capabilities", {"name": "xlsx"}))
    assert answer["degraded"] is True
    assert "list-sheets" in answer["actions"]


async def test_full_schema_when_small(platform: Platform, era: str) -> None:
    async with connect(platform, era) as client:
        answer = body(await client.call_tool("capabilities", {"name": "xlsx"}))
    assert "degraded" not in answer
    assert answer["network"] == "none"  # what it may reach (SPEC §17): nothing
    sheet = next(a for a in answer["actions"] if a["name"] == "read-sheet")
    assert "max-results" in [a["name"] for a in sheet["args"]]


async def test_search_finds_actions_across_the_registry(big_platform: Platform, era: str) -> None:
    async with connect(big_platform, era) as client:
        answer = body(await client.call_tool("capabilities", {"search": "credentials list"}))
        inside = body(
            await client.call_tool("capabilities", {"search": "sheet", "name": "bigcloud"})
        )
    assert [m["action"] for m in answer["matches"]] == ["list-credentials"]
    assert all(m["name"] == "bigcloud" for m in inside["matches"])
    assert "list-sheets" in [m["action"] for m in inside["matches"]]


async def test_registry_errors_are_listed(big_platform: Platform, era: str) -> None:
    async with connect(big_platform, era) as client:
        answer = body(await client.call_tool("capabilities", {}))
    assert any(e["name"] == "broken" for e in answer["errors"])


async def test_words_out_of_order_suggest_the_action(big_platform: Platform, era: str) -> None:
    async with connect(big_platform, era) as client:
        creds = body(
            await client.call_tool("run_tool", {"tool": "bigcloud", "action": "credential-list"})
        )
        sheets = body(
            await client.call_tool("capabilities", {"name": "bigcloud", "action": "sheets-list"})
        )
        ok = body(
            await client.call_tool(
                "run_tool",
                {"tool": "bigcloud", "action": "list-credentials", "args": {"max-results": 3}},
            )
        )
    assert creds["did_you_mean"][0] == "list-credentials"
    assert sheets["did_you_mean"][0] == "list-sheets"
    assert ok["status"] == "succeeded"
    assert ok["result"]["args"] == ["--max-results", "3"]


async def test_overview_readiness_follows_a_secret_set_later(
    mcp_settings: Settings, registry_root: Path, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    """The `{}` answer is kept per registry, but a tool's readiness is live."""
    folder = registry_root / "tools" / "needs-key"
    folder.mkdir(parents=True)
    (folder / "main.py").write_text(SCRIPT)
    (folder / "tool.yaml").write_text(
        "name: needs-key\ndescription: Needs a key.\nruntime: python\nentrypoint: main.py\n"
        "secrets: [AAT_TEST_OVERVIEW_KEY]\nactions:\n  - name: greet\n    description: Hi.\n"
    )
    monkeypatch.delenv("AAT_TEST_OVERVIEW_KEY", raising=False)
    platform = platform_with(mcp_settings, registry=str(registry_root))
    async with connect(platform, era) as client:
        listed = body(await client.call_tool("capabilities", {}))["tools"]
        entry = next(t for t in listed if t["name"] == "needs-key")
        assert entry["ready"] is False
        assert entry["missing_secrets"] == ["AAT_TEST_OVERVIEW_KEY"]
        monkeypatch.setenv("AAT_TEST_OVERVIEW_KEY", "set")
        listed = body(await client.call_tool("capabilities", {}))["tools"]
        entry = next(t for t in listed if t["name"] == "needs-key")
        assert entry["ready"] is True
        assert "missing_secrets" not in entry


async def test_a_large_registry_overview_fits_the_limit_and_says_how_to_narrow(
    mcp_settings: Settings, registry_root: Path, era: str
) -> None:
    for i in range(120):
        folder = registry_root / "tools" / f"svc-{i:03d}"
        folder.mkdir(parents=True)
        (folder / "main.py").write_text(SCRIPT)
        (folder / "tool.yaml").write_text(
            f"name: svc-{i:03d}\ndescription: Service {i} of the fleet, "
            + "with a description long enough to matter. " * 3
            + "\nruntime: python\nentrypoint: main.py\nactions:\n"
            + f"  - name: ping-{i:03d}\n    description: Ping it.\n"
        )
    platform = platform_with(
        mcp_settings,
        registry=str(registry_root),
        capabilities_max_bytes=6000,
        result_max_bytes=6000,
    )
    async with connect(platform, era) as client:
        result = await client.call_tool("capabilities", {})
        text = result.content[0].text  # type: ignore[union-attr]
        answer = body(result)
        last = body(await client.call_tool("capabilities", {"search": "ping-119"}))
    assert len(text.encode()) <= 6000 + 2000  # the limit, and room for the note
    assert answer["truncated"] is True and result.is_error is False
    shown = len(answer["tools"])
    assert 10 < shown < 120
    assert answer["tools"][0]["name"] == "svc-000"
    assert f"showing {shown} of 120 tools" in answer["note"] and "search=" in answer["note"]
    # What was left out of the overview is still one search away.
    assert [m["name"] for m in last["matches"]] == ["svc-119"]


async def test_a_tools_network_reach_is_in_its_schema(
    mcp_settings: Settings, registry_root: Path, era: str
) -> None:
    folder = registry_root / "tools" / "fetcher"
    folder.mkdir()
    (folder / "main.py").write_text(SCRIPT)
    (folder / "tool.yaml").write_text(
        "name: fetcher\ndescription: Fetches pages.\nruntime: python\nentrypoint: main.py\n"
        "network: {connect: [443, 5432]}\nlimits: {memory_mb: 1024}\n"
        "actions:\n  - {name: fetch, read_only: true}\n"
    )
    plat = platform_with(mcp_settings, registry=str(registry_root))
    async with connect(plat, era) as client:
        answer = body(await client.call_tool("capabilities", {"name": "fetcher"}))
    assert answer["network"] == "connect 443, 5432"
    assert answer["network_note"] == "UDP not restricted"
    # What one call may use (SPEC §20): the manifest's `limits:`, the defaults for the rest.
    assert answer["limits"] == {
        "processes": 64,
        "memory_mb": 1024,
        "file_mb": 256,
        "open_files": 256,
    }
