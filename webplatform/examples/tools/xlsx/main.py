"""xlsx: read local Excel workbooks with openpyxl (read-only, cached values, never writes them).

argv: `main.py ACTION --path FILE [--sheet NAME] [--max-results N] [--save FILE]`.
Prints one JSON object; exit 0 ok, 2 for a call that needs fixing (missing file, wrong
extension, unknown sheet), 1 when the workbook itself cannot be read.
Relative paths are resolved against AAT_CALLER_CWD (the caller's directory): the tool's own
working directory is its folder, which is never what the user meant.
`dump --save` writes a new .txt/.md file only inside a workspace (AAT_WORKSPACES, set by aat),
never into a folder that holds code, and never under a name that could be imported or run.
"""

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path

EXTENSIONS = (".xlsx", ".xlsm")
# Text only: any other name (.py, .pth, .sh, no suffix, ...) could be imported or executed.
SAVE_SUFFIXES = (".txt", ".md")
CODE_MARKERS = ("tool.yaml", "agent.yaml", "pyproject.toml", "setup.py", "package.json")
CODE_SUFFIXES = (".py", ".pth", ".pyc", ".so", ".js", ".sh")


class UsageError(Exception):
    """The call needs fixing; exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def resolve(raw):
    path = Path(raw).expanduser()
    if not path.is_absolute():
        base = os.environ.get("AAT_CALLER_CWD")
        if not base:
            raise UsageError(f"relative path {raw!r}: pass an absolute path")
        path = Path(base) / path
    return path


def workbook_path(raw):
    path = resolve(raw)
    if path.suffix.lower() not in EXTENSIONS:
        raise UsageError(
            f"{path.name}: only .xlsx/.xlsm workbooks are read; save .xls/.csv files as .xlsx first"
        )
    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    return path


def open_workbook(path):
    import openpyxl  # imported late so usage errors stay fast

    try:
        return openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # corrupt files fail in many ways; all mean "cannot read it"
        raise RuntimeError(f"{path} is not a readable .xlsx workbook: {exc}") from exc


def pick_sheet(wb, title):
    if title is None:
        return wb.worksheets[0]
    names = [ws.title for ws in wb.worksheets]
    if title not in names:
        raise UsageError(f"no sheet {title!r}; sheets are: {', '.join(map(repr, names))}")
    return wb[title]


def plain(value):
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


def data_rows(ws):
    """Non-empty rows, trailing empty cells trimmed, values made JSON-friendly."""
    ws.reset_dimensions()  # a wrong stored dimension must not hide cells
    for row in ws.iter_rows(min_row=1, min_col=1, values_only=True):
        cells = list(row)
        while cells and cells[-1] is None:
            cells.pop()
        if cells:
            yield [plain(v) for v in cells]


def first(rows, limit):
    taken = []
    for row in rows:
        if len(taken) == limit:
            return taken, True
        taken.append(row)
    return taken, False


def positive(raw):
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"--max-results must be a whole number, got {raw!r}") from None
    if value < 1:
        raise UsageError(f"--max-results must be at least 1, got {value}")
    return value


def list_sheets(args):
    path = workbook_path(args.path)
    wb = open_workbook(path)
    sheets = []
    for ws in wb.worksheets:
        rows, columns = ws.max_row, ws.max_column
        if rows is None or columns is None:  # no stored dimension: count
            rows = columns = 0
            for index, row in enumerate(data_rows(ws), 1):
                rows, columns = index, max(columns, len(row))
        sheets.append({"title": ws.title, "rows": rows, "columns": columns})
    return {"path": str(path), "sheets": sheets}


def read_sheet(args):
    path = workbook_path(args.path)
    ws = pick_sheet(open_workbook(path), args.sheet)
    rows, truncated = first(data_rows(ws), args.max_results)
    return {"sheet": ws.title, "rows": rows, "truncated": truncated}


def as_text(value):
    return "" if value is None else str(value)


def save_path(raw):
    """Where `--save` may write: a new text file in a workspace, away from any code."""
    path = resolve(raw)
    name = path.name
    if name.startswith(".") or path.suffix.lower() not in SAVE_SUFFIXES:
        raise UsageError(
            f"--save {name!r}: a dump is saved only as a .txt or .md file (not hidden, not a "
            "name that could be imported or run); choose a name like dump.txt"
        )
    folder = path.parent.resolve()
    workspaces = [Path(w).resolve() for w in os.environ.get("AAT_WORKSPACES", "").split(":") if w]
    if not any(folder == w or folder.is_relative_to(w) for w in workspaces):
        where = ", ".join(map(str, workspaces)) or "none: set AAT_WORKSPACES or run from a project"
        raise UsageError(f"--save {path}: dumps are saved only inside a workspace ({where})")
    if folder.is_dir() and any(
        entry.name in CODE_MARKERS or entry.suffix.lower() in CODE_SUFFIXES
        for entry in folder.iterdir()
    ):
        raise UsageError(
            f"--save {path}: {folder} holds code; save the dump in a folder of its own"
        )
    return folder / name


def dump(args):
    path = workbook_path(args.path)
    save = save_path(args.save) if args.save else None
    wb = open_workbook(path)
    parts, truncated = [], False
    for ws in wb.worksheets:
        rows, cut = first(data_rows(ws), args.max_results)
        truncated |= cut
        parts.append(f"## {ws.title}")
        parts += [" | ".join(as_text(v) for v in row) for row in rows]
        if cut:
            parts.append(f"... more rows; raise --max-results (now {args.max_results})")
        parts.append("")
    text = "\n".join(parts)
    if save is None:
        return {"text": text, "truncated": truncated}
    data = text.encode("utf-8")
    try:
        # "x": never overwrite; a dump only ever adds a new file, which keeps it reversible.
        with open(save, "xb") as out:
            out.write(data)
    except FileExistsError:
        raise UsageError(f"{save} already exists; choose a new file name") from None
    except FileNotFoundError:
        raise UsageError(f"folder {save.parent} does not exist") from None
    return {"saved": str(save), "bytes": len(data), "truncated": truncated}


def build_parser():
    parser = Parser(prog="xlsx")
    actions = parser.add_subparsers(dest="action", required=True)
    for name in ("list-sheets", "read-sheet", "dump"):
        sub = actions.add_parser(name)
        sub.add_argument("--path", required=True)
    actions.choices["read-sheet"].add_argument("--sheet")
    actions.choices["read-sheet"].add_argument("--max-results", type=positive, default=200)
    actions.choices["dump"].add_argument("--save")
    actions.choices["dump"].add_argument("--max-results", type=positive, default=1000)
    return parser


def fail(message, code):
    print(json.dumps({"error": message}, ensure_ascii=False))
    print(f"xlsx: error: {message}", file=sys.stderr)
    sys.exit(code)


def main():
    handlers = {"list-sheets": list_sheets, "read-sheet": read_sheet, "dump": dump}
    try:
        args = build_parser().parse_args()
        result = handlers[args.action](args)
    except UsageError as exc:
        fail(str(exc), 2)
    except RuntimeError as exc:
        fail(str(exc), 1)
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
