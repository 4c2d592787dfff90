"""The registry loader against real folders: what loads, what is reported, and when it re-reads."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from webplatform.registry import ManifestError, Registry, RegistryLoader

if TYPE_CHECKING:
    from tests.registry.conftest import RegistryDir

GOOD_ACTION = "actions:\n  - name: greet\n"


def error_for(registry: Registry, name: str) -> ManifestError:
    """The one error reported for `name`; fails if there are none or several."""
    found = [e for e in registry.errors if e.name == name]
    assert len(found) == 1, [str(e) for e in registry.errors]
    return found[0]


def manifest(*lines: str, actions: str = GOOD_ACTION) -> str:
    head = "name: t\ndescription: d\nruntime: python\nentrypoint: main.py\n"
    return head + "".join(line + "\n" for line in lines) + actions


# --- what a valid manifest becomes -----------------------------------------------------------


def test_valid_manifest_loads_every_field_verbatim(reg: RegistryDir) -> None:
    reg.tool(
        "xlsx",
        """\
        name: xlsx
        description: Lit des classeurs Excel — ünïcödé ✓
        version: 0.1.0
        runtime: python
        entrypoint: main.py
        secrets: [API_TOKEN]
        actions:
          - name: read-sheet
            description: Read one sheet.
            read_only: true
            timeout_s: 60
            args:
              - {name: path, type: string, required: true, description: Fichier .xlsx}
              - {name: workspace-id, type: integer}
              - {name: max_results, type: number, default: 2.5}
              - {name: mode, type: string, enum: [fast, fülle], default: fülle}
              - {name: api-key, type: string, secret: true}
            output_schema: {sheet: string, rows: [[cell]]}
        """,
    )
    registry = reg.load()
    assert registry.errors == ()
    tool = registry.tools["xlsx"]
    assert tool.description == "Lit des classeurs Excel — ünïcödé ✓"
    assert tool.kind == "tool" and tool.runtime == "python" and tool.secrets == ("API_TOKEN",)
    assert tool.entrypoint_path == reg.root / "tools" / "xlsx" / "main.py"
    action = tool.action("read-sheet")
    assert action is not None and action.read_only and action.timeout_s == 60.0
    # Argument names are kept exactly as written: hyphens and underscores both survive.
    assert [a.name for a in action.args] == [
        "path",
        "workspace-id",
        "max_results",
        "mode",
        "api-key",
    ]
    mode = action.arg("mode")
    assert mode is not None and mode.enum == ("fast", "fülle") and mode.default == "fülle"
    api_key = action.arg("api-key")
    assert api_key is not None and api_key.secret
    assert action.output_schema is not None
    assert json.loads(action.output_schema) == {"sheet": "string", "rows": [["cell"]]}


def test_agents_and_skills_load_into_their_own_kinds(reg: RegistryDir) -> None:
    reg.tool("helper", reg.tool_yaml("helper"), kind="agent")
    reg.skill(
        "writing", "---\nname: writing\ndescription: Écrire clairement\n---\n\n# Title\nBody ✓\n"
    )
    registry = reg.load()
    assert registry.errors == ()
    assert list(registry.agents) == ["helper"] and registry.tools == {}
    assert registry.agents["helper"].kind == "agent"
    skill = registry.skills["writing"]
    assert skill.description == "Écrire clairement"
    assert skill.body == "# Title\nBody ✓\n"


# --- one bad manifest never hides the others -------------------------------------------------


def test_broken_manifest_is_listed_and_the_good_ones_still_load(reg: RegistryDir) -> None:
    reg.tool("alpha")
    reg.tool("broken", "name: broken\ndescription: [unclosed\n")
    reg.tool("omega")
    registry = reg.load()
    assert sorted(registry.tools) == ["alpha", "omega"]
    error = error_for(registry, "broken")
    assert error.kind == "tool" and error.path == reg.root / "tools" / "broken" / "tool.yaml"


def test_malformed_yaml_reports_the_parsers_line(reg: RegistryDir) -> None:
    reg.tool("t", "name: t\ndescription: ok\nruntime: python\n  entrypoint: : main.py\n")
    error = error_for(reg.load(), "t")
    assert error.line == 4
    assert "YAML" in error.message and "fix" in error.message
    assert str(error).startswith(f"{reg.root / 'tools' / 't' / 'tool.yaml'}:4: ")


@pytest.mark.parametrize(
    ("extra", "line", "words"),
    [
        ("    args:\n      - {name: n, type: strng}\n", 8, ["unknown type 'strng'", "'string'"]),
        ("    args:\n      - {name: n}\n", 8, ["no `type`"]),
        ("    args:\n      - {name: a b, type: string}\n", 8, ["invalid name"]),
        ("    args:\n      - {name: n, type: integer, default: 'x'}\n", 8, ["not of type integer"]),
        ("    args:\n      - {name: n, type: integer, default: true}\n", 8, ["type integer"]),
        ("    args:\n      - {name: m, type: string, enum: [a], default: b}\n", 8, ["enum"]),
        ("    args:\n      - {name: m, type: string, enum: a}\n", 8, ["non-empty list"]),
        ("    args:\n      - {name: m, type: integer, enum: [1, x]}\n", 8, ["'x'", "integer"]),
        ("    args:\n      - {name: n, type: string, requird: true}\n", 8, ["'required'"]),
        ("    args:\n      - {name: n, type: string, required: maybe}\n", 8, ["true or false"]),
        ("    args:\n      - {name: n, type: string}\n      - {name: n, type: string}\n", 9,
         ["'n'", "twice"]),
        ("    timeout_s: 0\n", 7, ["positive number"]),
        ("    timeout_s: fast\n", 7, ["positive number"]),
        ("    output_schema: 12\n", 7, ["output_schema"]),
        ("    descripton: x\n", 7, ["did you mean 'description'"]),
        ("    read_only: true\n    reversible: false\n", 8, ["read_only", "drop one"]),
    ],
)  # fmt: skip
def test_bad_action_or_argument_names_its_line_and_the_fix(
    reg: RegistryDir, extra: str, line: int, words: list[str]
) -> None:
    reg.tool("t", manifest(actions="actions:\n  - name: greet\n" + extra))
    error = error_for(reg.load(), "t")
    assert error.line == line, str(error)
    for word in words:
        assert word in error.message
    assert "\n" not in error.message


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (manifest("runtime2: x"), 5, ["unknown key 'runtime2'", "'runtime'"]),
        ("name: t\nruntime: python\nentrypoint: main.py\n" + GOOD_ACTION, 1, ["`description`"]),
        (manifest().replace("python", "pyhton"), 3, ["'pyhton'", "did you mean 'python'"]),
        (manifest(actions="actions: []\n"), 5, ["at least one"]),
        (manifest(actions=""), 1, ["actions"]),
        (manifest("secrets: API_TOKEN"), 5, ["list of environment variable names"]),
        (manifest("warm: yes please"), 5, ["`warm`", "true or false"]),
        (manifest("warm: true").replace("python", "bash"), 5, ["needs `runtime: python`"]),
        (manifest("secrets: [api-token]"), 5, ["not an environment variable name"]),
        (manifest().replace("name: t", "name: T_1"), 1, ["not valid", "'t-1'"]),
        (manifest().replace("name: t", "name: other"), 1, ["does not match its folder 't'"]),
        ("- just\n- a list\n", 1, ["must be a YAML mapping"]),
        ("", 1, ["must be a YAML mapping"]),
        (manifest("description: again"), 5, ["appears twice", "line 2"]),
    ],
)
def test_bad_top_level_field_names_its_line_and_the_fix(
    reg: RegistryDir, text: str, line: int, words: list[str]
) -> None:
    reg.tool("t", text)
    error = error_for(reg.load(), "t")
    assert error.line == line, str(error)
    for word in words:
        assert word in error.message


def test_warm_is_false_unless_the_manifest_says_true(reg: RegistryDir) -> None:
    reg.tool("cold")
    reg.tool("hot", manifest("warm: true").replace("name: t", "name: hot"))
    tools = reg.load().tools
    assert (tools["cold"].warm, tools["hot"].warm) == (False, True)


def test_every_problem_in_one_manifest_is_reported_at_once(reg: RegistryDir) -> None:
    reg.tool("t", "name: t\ndescripton: x\nruntime: ruby\nentrypoint: main.py\nactions: []\n")
    errors = reg.load().errors
    assert [e.line for e in errors] == [2, 1, 3, 5]
    assert all(e.name == "t" and "\n" not in e.message for e in errors)


def test_duplicate_action_names_both_lines(reg: RegistryDir) -> None:
    reg.tool("t", manifest(actions="actions:\n  - name: greet\n  - name: greet\n"))
    error = error_for(reg.load(), "t")
    assert error.line == 7
    assert "'greet' is defined twice (also on line 6)" in error.message


# --- the gate's words and the manifest's flags -----------------------------------------------


def test_read_only_on_an_irreversible_verb_is_a_contradiction(reg: RegistryDir) -> None:
    reg.tool("t", manifest(actions="actions:\n  - name: delete-files\n    read_only: true\n"))
    error = error_for(reg.load(), "t")
    assert error.line == 7
    assert "'delete'" in error.message and "rename the action or drop read_only" in error.message


def test_read_only_in_a_tool_named_with_a_verb_points_at_the_tool(reg: RegistryDir) -> None:
    text = manifest(actions="actions:\n  - name: list\n    read_only: true\n")
    reg.tool("mail-send", text.replace("name: t", "name: mail-send", 1))
    error = error_for(reg.load(), "mail-send")
    assert (
        "tool name 'mail-send' has 'send'" in error.message and "rename the tool" in error.message
    )


def test_reversible_true_cannot_loosen_a_verb(reg: RegistryDir) -> None:
    reg.tool("t", manifest(actions="actions:\n  - name: send\n    reversible: true\n"))
    error = error_for(reg.load(), "t")
    assert error.line == 7 and "cannot be loosened" in error.message


def test_reversible_false_on_a_harmless_name_is_allowed(reg: RegistryDir) -> None:
    reg.tool("t", manifest(actions="actions:\n  - name: create\n    reversible: false\n"))
    action = reg.load().tools["t"].action("create")
    assert action is not None and action.reversible is False


# --- the entrypoint stays inside its folder --------------------------------------------------


@pytest.mark.parametrize(
    ("entrypoint", "words"),
    [
        ("../main.py", ["leaves the tool folder"]),
        ("sub/../../main.py", ["leaves the tool folder"]),
        ("/usr/bin/python3", ["absolute path"]),
        ("C:\\\\tools\\\\main.py", ["absolute path"]),
        ("missing.py", ["does not exist", "create it"]),
        (".", ["not a file"]),
    ],
)
def test_entrypoint_outside_or_missing_is_rejected(
    reg: RegistryDir, entrypoint: str, words: list[str]
) -> None:
    reg.tool("t", manifest().replace("main.py", f'"{entrypoint}"'))
    (reg.root.parent / "main.py").write_text("print(1)\n")
    error = error_for(reg.load(), "t")
    assert error.line == 4
    for word in words:
        assert word in error.message


def test_entrypoint_symlink_escaping_the_folder_is_rejected(
    reg: RegistryDir, tmp_path: Path
) -> None:
    reg.tool("t", manifest().replace("main.py", "link.py"), entrypoint=None)
    outside = tmp_path / "outside.py"
    outside.write_text("print(1)\n")
    (reg.root / "tools" / "t" / "link.py").symlink_to(outside)
    assert "resolves outside" in error_for(reg.load(), "t").message


def test_entrypoint_in_a_subfolder_is_fine(reg: RegistryDir) -> None:
    reg.tool("t", manifest().replace("main.py", "bin/run.sh"), entrypoint="bin/run.sh")
    assert reg.load().tools["t"].entrypoint == "bin/run.sh"


def test_exec_runtime_needs_an_executable_entrypoint(reg: RegistryDir) -> None:
    path = reg.tool("t", manifest().replace("python", "exec"))
    assert "chmod +x" in error_for(reg.load(), "t").message
    (path.parent / "main.py").chmod(0o755)
    assert "t" in reg.load().tools


# --- skills ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("# Just markdown\n", 1, ["no front matter", "'---'"]),
        ("---\nname: s\ndescription: d\n# never closed\n", 1, ["never closed"]),
        ("---\nname: s\n---\nbody\n", 2, ["`description`"]),
        ("---\nname: s\ndescription: d\ntags: [x]\n---\n", 4, ["unknown key 'tags'"]),
        ("---\nname: s\ndescription: [oops\n---\n", 4, ["YAML"]),
        ("---\nname: other\ndescription: d\n---\n", 2, ["does not match its folder 's'"]),
    ],
)
def test_bad_skill_is_reported_with_its_line(
    reg: RegistryDir, text: str, line: int, words: list[str]
) -> None:
    reg.skill("s", text)
    registry = reg.load()
    assert registry.skills == {}
    error = error_for(registry, "s")
    assert error.kind == "skill" and error.line == line, str(error)
    for word in words:
        assert word in error.message


# --- folders, roots and files that are not manifests ----------------------------------------


def test_folder_without_manifest_and_unreadable_encoding_are_reported(reg: RegistryDir) -> None:
    (reg.root / "tools" / "empty").mkdir(parents=True)
    (reg.root / "tools" / "__pycache__").mkdir()
    path = reg.tool("latin")
    path.write_bytes("name: latin\ndescription: caf\xe9\n".encode("latin-1"))
    registry = reg.load()
    assert "has no tool.yaml" in error_for(registry, "empty").message
    assert "UTF-8" in error_for(registry, "latin").message
    assert len(registry.errors) == 2


def test_first_root_wins_and_a_later_duplicate_is_an_error(
    reg: RegistryDir, tmp_path: Path
) -> None:
    first, second = reg, type(reg)(tmp_path / "two")
    first.tool("hello")
    second.tool("hello")
    second.tool("other")
    registry = RegistryLoader([first.root, second.root]).load()
    assert registry.tools["hello"].folder == first.root / "tools" / "hello"
    assert "other" in registry.tools
    error = error_for(registry, "hello")
    assert error.path == second.root / "tools" / "hello" / "tool.yaml"
    assert "already defined" in error.message and str(first.root) in error.message


def test_missing_or_empty_root_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    registry = RegistryLoader([tmp_path / "nope", tmp_path / "empty"]).load()
    messages = [e.message for e in registry.errors]
    assert len(messages) == 2
    assert "does not exist" in messages[0] and "has no tools/" in messages[1]


# --- the cache: cheap when nothing changed, live when something did --------------------------


def test_unchanged_registry_returns_the_identical_object(reg: RegistryDir) -> None:
    reg.tool("a")
    loader = reg.loader()
    assert loader.load() is loader.load()


def test_edited_manifest_is_seen_on_the_next_load(reg: RegistryDir) -> None:
    path = reg.tool("a")
    reg.tool("b")
    loader = reg.loader()
    before = loader.load()
    path.write_text(path.read_text().replace("Says hello", "Says bonjour"), encoding="utf-8")
    reg.touch(path)
    after = loader.load()
    assert after is not before
    assert after.tools["a"].description == "Says bonjour"
    # Only the edited manifest was parsed again: the other spec is the very same object.
    assert after.tools["b"] is before.tools["b"]


def test_fixing_a_broken_manifest_clears_its_error(reg: RegistryDir) -> None:
    path = reg.tool("a", "name: a\ndescription: [\n")
    loader = reg.loader()
    assert loader.load().errors
    path.write_text(reg.tool_yaml("a"), encoding="utf-8")
    reg.touch(path)
    registry = loader.load()
    assert registry.errors == () and "a" in registry.tools


def test_creating_the_missing_entrypoint_is_seen(reg: RegistryDir) -> None:
    reg.tool("a", entrypoint=None)
    loader = reg.loader()
    assert "does not exist" in error_for(loader.load(), "a").message
    (reg.root / "tools" / "a" / "main.py").write_text("print(1)\n")
    registry = loader.load()
    assert registry.errors == () and "a" in registry.tools


def test_added_and_removed_tools_are_seen(reg: RegistryDir) -> None:
    reg.tool("a")
    loader = reg.loader()
    assert list(loader.load().tools) == ["a"]
    reg.tool("b")
    assert list(loader.load().tools) == ["a", "b"]
    path = reg.root / "tools" / "a"
    for child in path.iterdir():
        child.unlink()
    path.rmdir()
    assert list(loader.load().tools) == ["b"]


def test_concurrent_loads_agree(reg: RegistryDir) -> None:
    for i in range(30):
        reg.tool(f"t{i}")
    loader = reg.loader()
    results: list[Registry] = []
    threads = [threading.Thread(target=lambda: results.append(loader.load())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert len(results[0].tools) == 30


def test_stat_key_includes_inode_so_a_same_size_replace_is_seen(reg: RegistryDir) -> None:
    path = reg.tool("a")
    loader = reg.loader()
    loader.load()
    # An editor saving by write-and-rename, with the old mtime preserved and the same size.
    st = path.stat()
    replacement = path.with_suffix(".tmp")
    replacement.write_text(path.read_text().replace("Says hello", "Says HELLO"), encoding="utf-8")
    os.utime(replacement, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(replacement, path)
    assert loader.load().tools["a"].description == "Says HELLO"
