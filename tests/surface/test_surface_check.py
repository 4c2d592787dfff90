"""`aat check` names each kind of drift between chat_surface.yaml and the registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from surface_helpers import (
    action,
    add_tool,
    edit_declaration,
    edit_manifest,
    load_registry,
    publish,
)

from webplatform.surface import DECLARATION_FILE, Problem, load_and_check


def problems(root: Path) -> list[Problem]:
    _, found = load_and_check(root / DECLARATION_FILE, load_registry(root))
    return found


def kinds(root: Path) -> list[str]:
    return [p.kind for p in problems(root)]


def only(root: Path, kind: str) -> str:
    found = problems(root)
    assert [p.kind for p in found] == [kind], found
    assert found[0].line is not None  # every difference points at its entry
    return found[0].message


def test_the_example_declaration_matches_the_example_registry(root: Path) -> None:
    assert problems(root) == []


def test_renamed_action(root: Path) -> None:
    edit_manifest(root, "xlsx", lambda d: action(d, "list-sheets").update(name="sheets-list"))
    message = only(root, "missing-action")
    assert "no action 'list-sheets'" in message and "renamed to sheets-list?" in message


def test_missing_tool(root: Path) -> None:
    (root / "tools" / "hello-world" / "tool.yaml").unlink()
    assert "no tool 'hello-world'" in only(root, "missing-tool")


def test_tool_whose_manifest_breaks(root: Path) -> None:
    edit_manifest(root, "hello-world", lambda d: d.update(runtime="cobol"))
    assert "does not load" in only(root, "missing-tool")


def test_new_argument(root: Path) -> None:
    new = {"name": "shout", "type": "boolean", "description": "in capitals"}
    edit_manifest(root, "hello-world", lambda d: action(d, "greet")["args"].append(new))
    assert "new argument 'shout'" in only(root, "new-argument")


def test_removed_argument(root: Path) -> None:
    def drop(d: dict[str, Any]) -> None:
        act = action(d, "read-sheet")
        act["args"] = [a for a in act["args"] if a["name"] != "sheet"]

    edit_manifest(root, "xlsx", drop)
    assert "argument 'sheet' is no longer in the registry" in only(root, "removed-argument")


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("type", "number", "changed type: published 'integer', registry 'number'"),
        ("default", 100, "changed default: published 200, registry 100"),
        ("required", True, "changed required: published False, registry True"),
        ("enum", [10, 200], "changed enum: published None, registry [10, 200]"),
    ],
)
def test_changed_argument(root: Path, field: str, value: Any, said: str) -> None:
    def change(d: dict[str, Any]) -> None:
        arg = next(a for a in action(d, "read-sheet")["args"] if a["name"] == "max-results")
        arg[field] = value

    edit_manifest(root, "xlsx", change)
    assert said in only(root, "changed-argument")


def test_an_argument_renamed_in_the_registry_is_both_new_and_removed(root: Path) -> None:
    edit_manifest(
        root, "hello-world", lambda d: action(d, "greet")["args"][0].update(name="person")
    )
    assert sorted(kinds(root)) == ["new-argument", "removed-argument"]


def test_irreversible_action_declared(root: Path) -> None:
    publish(root, "mail", {
        "tool": "outbox", "action": "send-message", "reversibility": "reversible",
        "description": "Send one message.", "args": {},
    })  # fmt: skip
    message = only(root, "irreversible")
    assert "outbox send-message" in message and "'send'" in message


def test_manifest_turning_irreversible_fails(root: Path) -> None:
    edit_manifest(root, "xlsx", lambda d: action(d, "dump").update(reversible=False))
    assert "reversible: false" in only(root, "irreversible")


def test_reversibility_changed_by_the_manifest(root: Path) -> None:
    edit_manifest(root, "hello-world", lambda d: action(d, "greet").update(read_only=False))
    assert "published as read-only, the gate now says reversible" in only(
        root, "changed-reversibility"
    )


def test_irreversible_cannot_even_be_written_down(root: Path) -> None:
    edit_declaration(
        root, lambda d: d["namespaces"]["demo"][0].update(reversibility="irreversible")
    )
    found = problems(root)
    assert [p.kind for p in found] == ["invalid"] and "reversibility must be one of" in str(
        found[0]
    )


LONG_TOOL = "quarterly-financial-statements"
LONG_ACTION = "list-unreconciled-ledger-entries"


def test_name_too_long_and_the_short_form_that_fixes_it(root: Path) -> None:
    add_tool(root, LONG_TOOL, [LONG_ACTION])
    entry = {"tool": LONG_TOOL, "action": LONG_ACTION, "reversibility": "read-only",
             "description": "Unreconciled entries.", "args": {}}  # fmt: skip
    publish(root, "finance", entry)
    message = only(root, "name-too-long")
    assert "finance_quarterly-financial-statements_list-unreconciled-ledger-entries" in message
    assert "'mcp__aat-chat__'" in message
    edit_declaration(root, lambda d: d["namespaces"]["finance"][0].update(short="unreconciled"))
    assert problems(root) == []


def test_colliding_names(root: Path) -> None:
    add_tool(root, "sheets", ["read.rows", "read_rows"])
    for act in ("read.rows", "read_rows"):
        publish(root, "office", {"tool": "sheets", "action": act, "reversibility": "read-only",
                                 "description": act, "args": {}})  # fmt: skip
    message = only(root, "name-collision")
    assert "'office_sheets_read_rows'" in message
    assert "tool sheets read.rows; tool sheets read_rows" in message


def test_names_that_differ_only_in_case_collide(root: Path) -> None:
    add_tool(root, "cased", ["List", "list"])
    for act in ("List", "list"):
        publish(root, "misc", {"tool": "cased", "action": act, "reversibility": "read-only",
                               "description": act, "args": {}})  # fmt: skip
    assert kinds(root) == ["name-collision"]


def test_declared_twice(root: Path) -> None:
    edit_declaration(root, lambda d: d["namespaces"]["demo"].append(d["namespaces"]["demo"][0]))
    assert "duplicate" in kinds(root)


def test_undeclared_registry_tools_are_fine(root: Path) -> None:
    add_tool(root, "unpublished", ["anything"])
    assert problems(root) == []


def test_a_bad_line_is_named(root: Path) -> None:
    path = root / DECLARATION_FILE
    text = path.read_text(encoding="utf-8").replace(
        "reversibility: read-only", "reversible: yes", 1
    )
    path.write_text(text, encoding="utf-8")
    found = problems(root)
    assert found and all(p.kind == "invalid" for p in found)
    assert any("unknown key 'reversible'" in p.message and p.line for p in found)


def aat_check(root: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AAT_HOME": str(tmp_path / "home")}
    return subprocess.run(
        [sys.executable, "-m", "webplatform", "check", "--registry", str(root)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.integration
def test_aat_check_passes_on_the_example_registry(root: Path, tmp_path: Path) -> None:
    done = aat_check(root, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 tools published (surface_version 1.0.0)" in done.stdout


@pytest.mark.integration
def test_aat_check_names_every_difference(root: Path, tmp_path: Path) -> None:
    edit_manifest(root, "xlsx", lambda d: action(d, "list-sheets").update(name="sheets-list"))
    edit_manifest(root, "hello-world", lambda d: action(d, "greet")["args"].append(
        {"name": "shout", "type": "boolean"}))  # fmt: skip
    wipe = {"tool": "outbox", "action": "delete-messages", "reversibility": "reversible"}
    publish(root, "mail", {**wipe, "description": "x", "args": {}})
    done = aat_check(root, tmp_path)
    assert done.returncode == 1
    errors = [line for line in done.stdout.splitlines() if line.startswith("error  surface")]
    assert len(errors) == 3, done.stdout
    joined = "\n".join(errors)
    for kind in ("missing-action", "new-argument", "irreversible"):
        assert f"error  surface {kind}: " in joined
    assert f"{root / DECLARATION_FILE}:" in joined  # file and line, for an editor to jump to


def aat_export(root: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AAT_HOME": str(tmp_path / "home")}
    argv = [sys.executable, "-m", "webplatform", "surface", "export", "--registry", str(root)]
    return subprocess.run(
        [*argv, *extra], capture_output=True, text=True, env=env, timeout=60, check=False
    )


@pytest.mark.integration
def test_aat_surface_export_writes_server_json(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "server.json"
    done = aat_export(
        root, tmp_path, "--out", str(out), "--url", "https://aat.example.org/mcp/chat"
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["$schema"].endswith("/server.schema.json")
    assert (document["name"], document["version"]) == ("io.github.aat/aat-chat", "1.0.0")
    meta = document["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]
    assert len(meta["aat/toolsDigest"]) == 64


@pytest.mark.integration
def test_aat_surface_export_refuses_a_drifted_surface(root: Path, tmp_path: Path) -> None:
    edit_manifest(root, "hello-world", lambda d: action(d, "greet").update(name="hello"))
    done = aat_export(root, tmp_path, "--out", str(tmp_path / "server.json"))
    assert done.returncode == 1 and "has no action 'greet'" in done.stderr
    assert not (tmp_path / "server.json").exists()
