"""Job history as CSV and .xlsx, with the same filters as the jobs page."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator

from fastapi import APIRouter
from openpyxl import Workbook
from starlette.responses import Response, StreamingResponse

from dashboard import data
from dashboard.deps import FiltersDep, OperatorDep, PlatformDep
from dashboard.render import reveal
from webplatform.store.models import Job
from webplatform.trust import claims

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
    "requester_proof",
    "decided_by",
    "allowed_by_rule",
    "started_at",
    "finished_at",
    "exit_code",
    "agent_reason",
)
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def _cells(row: Job, unsigned: bool) -> list[object]:
    """One export row; `unsigned`: the row claims an approval no valid signature covers, so
    `decided_by` says that instead of naming an approver (SPEC §20)."""
    out: list[object] = []
    for column in COLUMNS:
        value = getattr(row, column)
        if column == "decided_by" and unsigned:
            value = claims.UNSIGNED_APPROVAL
        elif hasattr(value, "isoformat"):
            value = value.isoformat()
        elif hasattr(value, "value"):
            value = value.value
        elif column == "requester_proof":
            # What vouched for requested_by: "token", "login", or nothing (SPEC §19).
            value = value or "self-reported"
        elif column in ("agent_reason", "client", "requested_by") and value is not None:
            # Words a client chose: invisible and direction-changing characters written out.
            value = reveal(value)
        out.append(value)
    return out


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Where a spreadsheet may start a new cell inside the text: after a comma, or a semicolon in
# locales that separate with `;`, or a line break if it ignores the quoting.
_FORMULA_AFTER_SEPARATOR = re.compile("([,;\n])([=+\\-@\t\r])")


def _safe_text(value: object) -> object:
    # A cell starting with = + - @ (or tab, CR) would be run as a formula by a spreadsheet app.
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _safe_csv_text(value: object) -> object:
    """`_safe_text`, and also neutralised after any separator a spreadsheet might split on."""
    value = _safe_text(value)
    if isinstance(value, str):
        return _FORMULA_AFTER_SEPARATOR.sub(r"\1'\2", value)
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
        # Every cell quoted, so no locale's separator can split one cell into two.
        writer = csv.writer(buffer, quoting=csv.QUOTE_ALL)
        writer.writerow(COLUMNS)
        for row in rows:
            cells = _cells(row, data.unsigned_approval(platform, row))
            writer.writerow([_safe_csv_text(c) for c in cells])
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
        sheet.append([_safe_text(c) for c in _cells(row, data.unsigned_approval(platform, row))])
    out = io.BytesIO()
    book.save(out)
    return Response(
        out.getvalue(),
        media_type=XLSX_TYPE,
        headers={"content-disposition": 'attachment; filename="jobs.xlsx"'},
    )
