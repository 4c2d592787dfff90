"""Job history as CSV and .xlsx, with the same filters as the jobs page."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

from fastapi import APIRouter
from openpyxl import Workbook
from starlette.responses import Response, StreamingResponse

from dashboard import data
from dashboard.deps import FiltersDep, OperatorDep, PlatformDep
from webplatform.store.models import JobSummary

router = APIRouter()
COLUMNS = (
    "id",
    "created_at",
    "kind",
    "name",
    "action",
    "irreversible",
    "state",
    "surface",
    "client",
    "requested_by",
    "decided_by",
    "started_at",
    "finished_at",
    "exit_code",
)
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def _cells(row: JobSummary) -> list[object]:
    out: list[object] = []
    for column in COLUMNS:
        value = getattr(row, column)
        if hasattr(value, "isoformat"):
            value = value.isoformat()
        elif hasattr(value, "value"):
            value = value.value
        out.append(value)
    return out


def _safe_text(value: object) -> object:
    # A cell starting with = + - @ would be run as a formula by a spreadsheet app.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


@router.get("/jobs.csv")
def jobs_csv(
    platform: PlatformDep,
    _operator: OperatorDep,
    filters: FiltersDep,
) -> Response:
    """The filtered history as CSV (UTF-8, one header row)."""
    rows = data.all_jobs(platform=platform, filters=filters)

    def lines() -> Iterator[str]:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow([_safe_text(c) for c in _cells(row)])
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
        yield buffer.getvalue()

    return StreamingResponse(
        lines(),
        media_type="text/csv; charset=utf-8",
        headers={"content-disposition": 'attachment; filename="jobs.csv"'},
    )


@router.get("/jobs.xlsx")
def jobs_xlsx(
    platform: PlatformDep,
    _operator: OperatorDep,
    filters: FiltersDep,
) -> Response:
    """The filtered history as an Excel workbook (one sheet, "jobs")."""
    rows = data.all_jobs(platform=platform, filters=filters)
    book = Workbook(write_only=True)
    sheet = book.create_sheet("jobs")
    sheet.append(list(COLUMNS))
    for row in rows:
        sheet.append([_safe_text(c) for c in _cells(row)])
    out = io.BytesIO()
    book.save(out)
    return Response(
        out.getvalue(),
        media_type=XLSX_TYPE,
        headers={"content-disposition": 'attachment; filename="jobs.xlsx"'},
    )
