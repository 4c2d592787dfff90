"""No function in the product is over 60 lines (`make lint` runs this file as a script; ruff's
PLR0913 keeps the six-parameter limit). A function's length is its span from `def` to its last
line, docstring and comments included: what a reader has to hold at once.

`python tests/test_code_size.py webplatform dashboard` names each function over the limit
with its file, line and length, and exits 1 if there is one.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

MAX_LINES = 60
ROOT = Path(__file__).resolve().parent.parent
# Code the product runs; example tools are the user's to write, migrations are generated.
CHECKED = ("webplatform", "dashboard")
EXCLUDED = ("webplatform/examples/", "webplatform/store/migrations/versions/")


def function_lengths(source: str) -> Iterator[tuple[str, int, int]]:
    """Each function and method in `source`: its qualified name, first line and length."""
    tree = ast.parse(source)
    yield from _walk(tree, "")


def _walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{child.name}"
            end = child.end_lineno or child.lineno
            yield name, child.lineno, end - child.lineno + 1
            yield from _walk(child, f"{name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _walk(child, f"{prefix}{child.name}.")
        else:
            yield from _walk(child, prefix)


def too_long(paths: list[Path]) -> list[str]:
    """One line per function over MAX_LINES under `paths`: `file:line: name is N lines`."""
    found: list[str] = []
    for root in paths:
        for path in sorted(root.rglob("*.py") if root.is_dir() else [root]):
            shown = path.resolve().relative_to(ROOT).as_posix()
            if shown.startswith(EXCLUDED):
                continue
            for name, line, length in function_lengths(path.read_text(encoding="utf-8")):
                if length > MAX_LINES:
                    found.append(
                        f"{shown}:{line}: {name} is {length} lines (at most {MAX_LINES}); "
                        "split it into functions that each do one thing"
                    )
    return found


def test_no_product_function_is_over_the_limit() -> None:
    assert too_long([ROOT / name for name in CHECKED]) == []


def test_a_long_function_is_named_with_its_length() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    source = f"class Job:\n    def ok(self):\n        pass\n\n    def run(self):\n{body}"
    lengths = {name: n for name, _, n in function_lengths(source.replace("\n    x", "\n        x"))}
    assert lengths == {"Job.ok": 2, "Job.run": MAX_LINES + 1}


if __name__ == "__main__":
    problems = too_long([ROOT / arg for arg in sys.argv[1:]] or [ROOT / n for n in CHECKED])
    print("\n".join(problems) or f"no function over {MAX_LINES} lines")  # noqa: T201
    sys.exit(1 if problems else 0)
