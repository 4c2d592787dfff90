"""One place for each of two things ARCHITECTURE.md promises (SPEC §21): a call becomes a
process call only in `jobs.execution.process_call`, and an approved job's start-time checks
are made only by the worker's `admit`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def _callers(names: set[str]) -> dict[str, set[str]]:
    """For each function or attribute name in `names`, where it is called outside its own
    package's definition: "module.function" of every calling function."""
    found: dict[str, set[str]] = {n: set() for n in names}
    for package in ("webplatform", "dashboard"):
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for func in ast.walk(tree):
                if not isinstance(func, ast.FunctionDef):
                    continue
                for node in ast.walk(func):
                    if isinstance(node, ast.Call):
                        target = node.func
                        name = (
                            target.attr
                            if isinstance(target, ast.Attribute)
                            else getattr(target, "id", "")
                        )
                        if name in names:
                            found[name].add(f"{module}.{func.name}")
    return found


def test_only_process_call_builds_a_tool_process_call() -> None:
    outside = {
        c for c in _callers({"ToolCall"})["ToolCall"] if not c.startswith("webplatform.process.")
    }
    assert outside == {"webplatform.jobs.execution.process_call"}


def test_only_the_worker_s_admit_makes_the_start_time_checks() -> None:
    # The signature, policy and co-approvals, preview re-run, ledger and rule checks a run
    # starts on: each asked from `admit` (or the helpers it alone calls) and nowhere else.
    checks = {"changed_since_approval", "start_problem", "admit"}
    found = _callers(checks)
    admission = {
        "webplatform.worker.admit",
        "webplatform.worker._policy_problem",
        "webplatform.worker._rule_problem",
    }
    assert found["changed_since_approval"] <= admission and found["changed_since_approval"]
    callers = {c for c in found["start_problem"] if not c.startswith("webplatform.trust.")}
    assert callers <= admission and callers
    assert found["admit"] == {"webplatform.worker.admit", "webplatform.worker.start_claimed"}


def test_only_the_trust_door_and_the_login_check_a_password() -> None:
    # A step-up's password is checked by `trust.door` alone (the dashboard's cards, forms
    # and the command line's `--password-stdin` all reach it); logging in is the other use.
    # The login's check is the sessions store object's `log_in` (its `attempt` inside it).
    callers = _callers({"authenticate"})["authenticate"]
    outside = {c for c in callers if not c.startswith("webplatform.store.")}
    assert outside == {"webplatform.trust.door._check_password"}
    login = {"webplatform.store.sessions.log_in", "webplatform.store.sessions.attempt"}
    assert callers - outside == {"webplatform.store.operators.authenticate", *login}
