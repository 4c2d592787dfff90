"""One error shape in the core: an operation that fails raises (`Refusal`, carrying the answer,
or `NotStarted` for a tool process); none returns its failure as a string or a dict in place
of its result."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _members(annotation: ast.expr) -> list[str]:
    """The members of a `A | B | ...` annotation, as written."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _members(annotation.left) + _members(annotation.right)
    return [ast.unparse(annotation)]


def _mixed_returns(path: Path) -> list[str]:
    """Functions of `path` declared to return a result or else a `str` or a `dict`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.returns is None:
            continue
        members = _members(node.returns)
        error_like = [m for m in members if m == "str" or m.startswith("dict")]
        results = [m for m in members if m != "None" and m not in error_like]
        both = "str" in error_like and any(m.startswith("dict") for m in error_like)
        if (error_like and results) or both:
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            found.append(f"{where} {node.name} -> {ast.unparse(node.returns)}")
    return found


def test_no_function_returns_a_result_or_else_an_error_string_or_dict() -> None:
    paths = sorted([*ROOT.glob("webplatform/**/*.py"), *ROOT.glob("dashboard/**/*.py")])
    mixed = [line for path in paths for line in _mixed_returns(path)]
    assert mixed == [], "raise instead (jobs.answers.Refusal, confine.NotStarted):\n" + "\n".join(
        mixed
    )
