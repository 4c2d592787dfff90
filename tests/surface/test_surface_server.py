"""The chat server in memory: its identity, only the declared tools, the gate, runs, caps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from surface_helpers import ERAS, EXAMPLE_NAMES, action, body, edit_manifest, load_registry

from webplatform.config import Settings
from webplatform.mcp.chat import (
    ChatSurfaceError,
    build_chat_server,
    exported_digest,
    load_surface,
    server_json,
)
from webplatform.mcp.protocol import TOOLS_DIGEST_META_KEY
from webplatform.platform import Platform
from webplatform.store.models import Surface

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connect(settings: Settings, mode: str) -> AsyncIterator[Client]:
    platform = Platform(settings)
    try:
        async with Client(build_chat_server(platform, surface=Surface.mcp_stdio), mode=mode) as c:
            yield c
    finally:
        platform.engine.dispose()


@pytest.mark.parametrize("mode", ERAS)
async def test_identity_and_only_the_declared_tools(chat_settings: Settings, mode: str) -> None:
    async with connect(chat_settings, mode) as client:
        info = client.session.server_info if mode == "legacy" else None
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert sorted(tools) == EXAMPLE_NAMES  # no run_tool, no outbox send or delete
    if info is not None:
        assert (info.name, info.version) == ("aat-chat", "1.0.0")
    read = tools["office_xlsx_read-sheet"]
    assert read.title == "Read a workbook sheet"
    assert read.input_schema == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute path of a local .xlsx/.xlsm file"},
            "sheet": {
                "type": "string",
                "description": "Sheet title; the first sheet when left out",
            },
            "max-results": {
                "type": "integer",
                "default": 200,
                "description": "Most rows to return",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }


async def test_annotations_come_from_the_gate(chat_settings: Settings) -> None:
    async with connect(chat_settings, "legacy") as client:
        tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
    greet, dump = tools["demo_hello-world_greet"], tools["office_xlsx_dump"]
    assert greet is not None and dump is not None
    assert (greet.read_only_hint, greet.destructive_hint, greet.idempotent_hint) == (
        True, False, True,
    )  # fmt: skip
    # dump writes a new file with `save`: reversible, so not read-only, yet never destructive.
    assert (dump.read_only_hint, dump.destructive_hint) == (False, False)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_published_tool_runs_through_services(chat_settings: Settings, mode: str) -> None:
    async with connect(chat_settings, mode) as client:
        ran = body(await client.call_tool("demo_hello-world_greet", {"name": "Ünï"}))
        summary = body(await client.call_tool("text_summarize", {"text": "One. Two. Three."}))
    assert ran["status"] == "succeeded" and ran["result"] == {"greeting": "Hello, Ünï!"}
    assert ran["tool"] == "hello-world" and ran["action"] == "greet" and ran["job"] > 0
    assert summary["status"] == "succeeded" and summary["result"]["sentences"] == 3


async def test_bad_arguments_and_unknown_tools_are_results(chat_settings: Settings) -> None:
    async with connect(chat_settings, "2026-07-28") as client:
        wrong = await client.call_tool("demo_hello-world_greet", {"nmae": "x"})
        unknown = await client.call_tool("mail_outbox_send-message", {"to": "a"})
        generic = await client.call_tool("run_tool", {"tool": "outbox"})
    assert wrong.is_error and body(wrong)["status"] == "invalid"
    assert body(wrong)["did_you_mean"]  # the pinned schema's `name`
    for result in (unknown, generic):
        assert result.is_error and body(result)["status"] == "invalid"
        assert "no MCP tool" in body(result)["error"]
    assert "mail_outbox_list-messages" in body(unknown)["did_you_mean"]


async def test_drift_after_start_is_refused_not_run(chat_settings: Settings, root: Path) -> None:
    async with connect(chat_settings, "legacy") as client:
        edit_manifest(root, "hello-world", lambda d: action(d, "greet").update(reversible=False))
        refused = await client.call_tool("demo_hello-world_greet", {"name": "x"})
    answer = body(refused)
    assert refused.is_error and answer["status"] == "refused" and "job" not in answer
    assert "no longer matches the registry" in answer["error"] and "aat check" in answer["error"]


async def test_results_are_capped_with_a_note_naming_the_narrowing_args(
    chat_settings: Settings,
) -> None:
    settings = chat_settings.model_copy(update={"result_max_bytes": 600})
    async with connect(settings, "legacy") as client:
        big = body(await client.call_tool("text_summarize", {
            "text": "word " * 2000 + ".", "max-words": 1000,
        }))  # fmt: skip
    assert big["truncated"] is True
    assert "max-words" in big["note"] and "max-sentences" in big["note"]


def test_a_drifted_declaration_is_not_served(root: Path) -> None:
    edit_manifest(root, "xlsx", lambda d: action(d, "dump").update(name="dump-all"))
    with pytest.raises(ChatSurfaceError) as caught:
        load_surface([root], load_registry(root))
    assert [p.kind for p in caught.value.problems] == ["missing-action"]


def test_no_declaration_no_surface(tmp_path: Path) -> None:
    with pytest.raises(ChatSurfaceError, match="no chat_surface.yaml"):
        load_surface([tmp_path], load_registry(tmp_path))


def discover_meta(settings: Settings) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with connect(settings, "auto") as client:  # auto asks server/discover
            discovered = client.session.discover_result
            assert discovered is not None and discovered.meta is not None
            return dict(discovered.meta)

    return anyio.run(go)


def test_export_and_discover_report_the_same_digest(chat_settings: Settings, root: Path) -> None:
    registry = load_registry(root)
    declaration = load_surface([root], registry)
    document = server_json(declaration, registry, url="https://aat.example.org/mcp/chat")
    published = document["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]
    meta = discover_meta(chat_settings)
    assert published[TOOLS_DIGEST_META_KEY] == meta[TOOLS_DIGEST_META_KEY]
    assert anyio.run(exported_digest, declaration, registry) == meta[TOOLS_DIGEST_META_KEY]
    assert meta["aat/surfaceVersion"] == published["aat/surfaceVersion"] == "1.0.0"
    assert document["name"].count("/") == 1 and len(document["description"]) <= 100
    assert document["version"] == "1.0.0"  # the surface's version, not the package's
    assert document["remotes"] == [
        {"type": "streamable-http", "url": "https://aat.example.org/mcp/chat"}
    ]
    assert document["packages"][0]["packageArguments"][-1]["value"] == "chat"


def test_the_digest_moves_only_with_the_declaration(chat_settings: Settings, root: Path) -> None:
    before = discover_meta(chat_settings)[TOOLS_DIGEST_META_KEY]
    # A manifest's wording is not the published wording: the surface does not change.
    edit_manifest(root, "hello-world", lambda d: action(d, "greet").update(description="Hi."))
    assert discover_meta(chat_settings)[TOOLS_DIGEST_META_KEY] == before
