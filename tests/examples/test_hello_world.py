"""hello-world: the smallest tool, and the manifests' shared shape."""

from __future__ import annotations

import pytest
import yaml
from example_support import RunExample

from webplatform.config import EXAMPLES_ROOT


def test_greet_answers_with_the_name(run_example: RunExample) -> None:
    res = run_example("hello-world", "greet", {"name": "Žofie"})
    assert res.outcome == "succeeded", res.error
    assert res.result == {"greeting": "Hello, Žofie!"}


def test_greet_without_name_is_a_usage_error(run_example: RunExample) -> None:
    res = run_example("hello-world", "greet")
    assert res.outcome == "usage_error"
    assert res.error is not None and "--name" in res.error


MANIFESTS = sorted(EXAMPLES_ROOT.glob("*/*/*.yaml"))


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.parent.name)
def test_manifests_use_only_the_spec_fields(manifest) -> None:  # type: ignore[no-untyped-def]
    raw = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    top = {"name", "description", "version", "runtime", "entrypoint", "secrets", "actions"}
    top |= {"reads", "writes"}  # SPEC §14
    top |= {"warm"}  # SPEC §12
    action_keys = {"name", "description", "read_only", "reversible", "timeout_s", "args"}
    action_keys |= {"preview"}  # SPEC §16
    arg_keys = {"name", "type", "required", "description", "default", "enum", "secret"}
    assert set(raw) <= top and {"name", "runtime", "entrypoint", "actions"} <= set(raw)
    assert raw["name"] == manifest.parent.name
    assert (manifest.parent / raw["entrypoint"]).is_file()
    for action in raw["actions"]:
        assert set(action) <= action_keys | {"output_schema"}
        assert not (action.get("read_only") and action.get("reversible") is False)
        for arg in action.get("args") or ():
            assert set(arg) <= arg_keys


def test_the_example_registry_has_every_kind() -> None:
    assert {p.parent.name for p in MANIFESTS} >= {"hello-world", "xlsx", "outbox", "summarize"}
    skill = (EXAMPLES_ROOT / "skills" / "approvals" / "SKILL.md").read_text(encoding="utf-8")
    front = yaml.safe_load(skill.split("---")[1])
    assert front["name"] == "approvals" and front["description"]
    assert "run_tool_confirmed" in skill and "job_status" in skill
