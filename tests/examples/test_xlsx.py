"""xlsx: real workbooks written with openpyxl, read back through the runner."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import openpyxl
import pytest
from example_support import RunExample, load_example


@pytest.fixture
def workbook(tmp_path: Path) -> Path:
    wb = openpyxl.Workbook()
    summary = wb.active
    summary.title = "Přehled"
    summary.append(["Jméno", "Narozen", "Poznámka", None, None])
    summary["E1"] = None
    summary["F1"] = "x"  # widens the sheet, so row 2 has trailing empty cells to trim
    summary.append(["Žluťoučký kůň", dt.date(2024, 2, 29), "úpěl ďábelské ódy"])
    summary.append([])  # an empty row, skipped
    summary.append([None, dt.datetime(2024, 3, 1, 13, 30, 5), 3.5, True])
    summary.append([None, None, None])  # cells that exist but are empty
    summary.append(["poslední", 42])
    data = wb.create_sheet("Data")
    for n in range(1, 31):
        data.append([n, f"řádek {n}"])
    wb.create_sheet("Prázdný")
    path = tmp_path / "sešit.xlsx"
    wb.save(path)
    return path


def test_list_sheets_gives_titles_and_sizes(run_example: RunExample, workbook: Path) -> None:
    res = run_example("xlsx", "list-sheets", {"path": str(workbook)})
    assert res.outcome == "succeeded", res.error
    assert res.result == {
        "path": str(workbook),
        "sheets": [
            {"title": "Přehled", "rows": 6, "columns": 6},
            {"title": "Data", "rows": 30, "columns": 2},
            {"title": "Prázdný", "rows": 1, "columns": 1},
        ],
    }


def test_read_sheet_defaults_to_the_first_sheet(run_example: RunExample, workbook: Path) -> None:
    res = run_example("xlsx", "read-sheet", {"path": str(workbook)})
    assert res.outcome == "succeeded", res.error
    assert res.result == {
        "sheet": "Přehled",
        "rows": [
            ["Jméno", "Narozen", "Poznámka", None, None, "x"],
            ["Žluťoučký kůň", "2024-02-29T00:00:00", "úpěl ďábelské ódy"],
            [None, "2024-03-01T13:30:05", 3.5, True],
            ["poslední", 42],
        ],
        "truncated": False,
    }
    assert "Žluťoučký kůň" in res.stdout  # not \u-escaped on the wire either


def test_read_sheet_by_name_with_max_results(run_example: RunExample, workbook: Path) -> None:
    args = {"path": str(workbook), "sheet": "Data", "max-results": 5}
    res = run_example("xlsx", "read-sheet", args)
    assert res.result is not None
    assert res.result["rows"] == [[n, f"řádek {n}"] for n in range(1, 6)]
    assert res.result["truncated"] is True
    exact = run_example("xlsx", "read-sheet", {**args, "max-results": 30})
    assert exact.result is not None
    assert (len(exact.result["rows"]), exact.result["truncated"]) == (30, False)


def test_empty_sheet_has_no_rows(run_example: RunExample, workbook: Path) -> None:
    res = run_example("xlsx", "read-sheet", {"path": str(workbook), "sheet": "Prázdný"})
    assert res.result == {"sheet": "Prázdný", "rows": [], "truncated": False}


def test_unknown_sheet_lists_the_sheets(run_example: RunExample, workbook: Path) -> None:
    res = run_example("xlsx", "read-sheet", {"path": str(workbook), "sheet": "Listopad"})
    assert res.outcome == "usage_error"
    assert res.error == (
        "exit 2 (usage error): no sheet 'Listopad'; sheets are: 'Přehled', 'Data', 'Prázdný'"
    )


def test_missing_file_is_a_usage_error(run_example: RunExample, tmp_path: Path) -> None:
    res = run_example("xlsx", "list-sheets", {"path": str(tmp_path / "nope.xlsx")})
    assert res.outcome == "usage_error"
    assert res.error is not None and f"no such file: {tmp_path / 'nope.xlsx'}" in res.error


@pytest.mark.parametrize("name", ["old.xls", "table.csv"])
def test_other_formats_are_refused_by_name(
    run_example: RunExample, tmp_path: Path, name: str
) -> None:
    (tmp_path / name).write_text("a,b\n")
    res = run_example("xlsx", "read-sheet", {"path": str(tmp_path / name)})
    assert res.outcome == "usage_error"
    assert res.error is not None and "only .xlsx/.xlsm workbooks are read" in res.error


def test_corrupt_workbook_is_a_failure(run_example: RunExample, tmp_path: Path) -> None:
    (tmp_path / "broken.xlsx").write_bytes(b"this is not a zip file")
    res = run_example("xlsx", "list-sheets", {"path": str(tmp_path / "broken.xlsx")})
    assert res.outcome == "failed"
    assert res.exit_code == 1
    assert res.error is not None and "is not a readable .xlsx workbook" in res.error


def test_relative_path_needs_the_callers_directory(run_example: RunExample, workbook: Path) -> None:
    alone = run_example("xlsx", "list-sheets", {"path": workbook.name})
    assert alone.outcome == "usage_error"
    assert alone.error is not None and "pass an absolute path" in alone.error
    resolved = run_example(
        "xlsx", "list-sheets", {"path": workbook.name}, caller_cwd=workbook.parent
    )
    assert resolved.outcome == "succeeded", resolved.error
    assert resolved.result is not None and resolved.result["path"] == str(workbook)


def test_dump_is_readable_text(run_example: RunExample, workbook: Path) -> None:
    res = run_example("xlsx", "dump", {"path": str(workbook), "max-results": 3})
    assert res.outcome == "succeeded", res.error
    assert res.result is not None
    text = res.result["text"]
    assert text.startswith("## Přehled\nJméno | Narozen | Poznámka |  |  | x\n")
    assert "Žluťoučký kůň | 2024-02-29T00:00:00 | úpěl ďábelské ódy" in text
    assert "## Data\n1 | řádek 1\n2 | řádek 2\n3 | řádek 3\n... more rows" in text
    assert "## Prázdný" in text
    assert res.result["truncated"] is True


def test_dump_saves_to_a_new_file_and_never_overwrites(
    run_example: RunExample, workbook: Path, tmp_path: Path
) -> None:
    target = tmp_path / "dump.txt"
    res = run_example("xlsx", "dump", {"path": str(workbook), "save": str(target)})
    assert res.outcome == "succeeded", res.error
    data = target.read_bytes()
    assert res.result == {"saved": str(target), "bytes": len(data), "truncated": False}
    assert "Žluťoučký kůň" in data.decode("utf-8")
    again = run_example("xlsx", "dump", {"path": str(workbook), "save": str(target)})
    assert again.outcome == "usage_error"
    assert again.error is not None and "already exists" in again.error
    assert target.read_bytes() == data


@pytest.mark.parametrize("name", ["openpyxl.py", "evil.pth", ".bashrc", "run", "x.sh", "a.pyc"])
def test_dump_refuses_names_that_could_be_imported_or_run(
    run_example: RunExample, workbook: Path, tmp_path: Path, name: str
) -> None:
    res = run_example("xlsx", "dump", {"path": str(workbook), "save": str(tmp_path / name)})
    assert res.outcome == "usage_error"
    assert res.error is not None and ".txt or .md" in res.error
    assert not (tmp_path / name).exists()


def test_dump_saves_only_inside_a_workspace(
    run_example: RunExample, workbook: Path, home: Path
) -> None:
    outside = home / "dump.txt"  # AAT_HOME is beside the workspace, not in it
    res = run_example("xlsx", "dump", {"path": str(workbook), "save": str(outside)})
    assert res.outcome == "usage_error"
    assert res.error is not None and "only inside a workspace" in res.error
    assert not outside.exists()


def test_dump_never_saves_beside_code(
    run_example: RunExample, workbook: Path, tmp_path: Path
) -> None:
    package = tmp_path / "package"
    package.mkdir()
    (package / "module.py").write_text("print('hi')\n")
    res = run_example("xlsx", "dump", {"path": str(workbook), "save": str(package / "d.txt")})
    assert res.outcome == "usage_error"
    assert res.error is not None and "holds code" in res.error
    assert not (package / "d.txt").exists()


def test_dump_cannot_write_into_its_own_folder_even_past_its_checks(
    run_example: RunExample, workbook: Path
) -> None:
    """The xlsx folder is not a workspace: the tool refuses, and Landlock would refuse anyway."""
    own = load_example("tool", "xlsx").folder / "notes.txt"
    res = run_example("xlsx", "dump", {"path": str(workbook), "save": str(own)})
    assert res.outcome == "usage_error"
    assert not own.exists()
