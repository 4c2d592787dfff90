"""Run the shipped example registry through the real runner, one real subprocess per call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from example_support import RunExample, load_example
from workspaces import aat_home_beside

from webplatform.process import confine, outcome, runner


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = aat_home_beside(tmp_path)
    path.mkdir()
    return path


@pytest.fixture
def run_example(home: Path, tmp_path: Path) -> RunExample:
    """`run_example("xlsx", "read-sheet", {...})` -> RunResult; kind="agent" for agents."""

    def run(
        name: str,
        action: str,
        args: dict[str, Any] | None = None,
        *,
        kind: str = "tool",
        **kw: Any,
    ) -> outcome.RunResult:
        tool = load_example(kind, name)
        spec = tool.action(action)
        assert spec is not None, f"{name} has no action {action}"
        fence = confine.Fence(home=home, workspaces=(str(tmp_path),))
        call = runner.ToolCall(tool, spec, args or {}, home=home, fence=fence, **kw)
        return runner.run(call)

    return run
