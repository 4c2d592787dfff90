"""The wheel carries everything `aat` needs at run time, not only the Python modules."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_templates_static_examples_migrations_and_the_script(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("aat-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "dashboard/templates/base.html",
        "dashboard/static/htmx.min.js",
        "webplatform/examples/tools/xlsx/tool.yaml",
        "webplatform/examples/tools/outbox/main.py",
        "webplatform/examples/skills/approvals/SKILL.md",
        "webplatform/store/migrations/env.py",
    ):
        assert required in names, f"{required} missing from {wheel.name}"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "aat = webplatform.cli:main" in text
    assert not any(n.startswith("tests/") for n in names)
