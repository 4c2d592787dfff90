"""The results table, printed and written to bench/RESULTS.md with the date and machine."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bench.common import ISSUE_35, Report, machine, verdict

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
NOTES = Path(__file__).resolve().parent / "NOTES.md"


def table(reports: list[Report]) -> str:
    """A markdown table of every row."""
    lines = [
        "| id | what | measured | other side / baseline | target | |",
        "|---|---|---|---|---|---|",
    ]
    for report in reports:
        for row in report.rows:
            lines.append(
                f"| {row.bench} | {row.what} | {row.measured} | {row.baseline} | "
                f"{row.target} | {verdict(row.met)} |"
            )
    return "\n".join(lines)


def issue_table(reports: list[Report]) -> str:
    """Issue 35's table: each of its lines with the rows that answer it, in the issue's order
    (a line no benchmark of this run answered says so)."""
    rows = [row for report in reports for row in report.rows if row.issue]
    lines = [
        "| issue 35 | id | what | measured | baseline (same run) | target | |",
        "|---|---|---|---|---|---|---|",
    ]
    for line in ISSUE_35:
        answers = [row for row in rows if row.issue == line]
        for row in answers:
            lines.append(
                f"| {line} | {row.bench} | {row.what} | {row.measured} | {row.baseline} | "
                f"{row.target} | {verdict(row.met)} |"
            )
        if not answers:
            lines.append(f"| {line} | | not measured in this run | | | | |")
    return "\n".join(lines)


def write_results(reports: list[Report], *, full: bool, write: bool) -> str:
    """The results as markdown; written to RESULTS.md (a partial run to RESULTS-partial.md)."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "# Benchmark results",
        "",
        f"Run {now} by `make bench` (`python -m bench`).",
        "",
        f"Machine: {machine()}.",
        "",
        "## Issue 35's table",
        "",
        issue_table(reports),
        "",
        "## Every row",
        "",
        table(reports),
        "",
        "## Notes from this run",
        "",
    ]
    for report in reports:
        parts.append(f"### {report.bench}: {report.title}")
        parts.append("")
        parts.extend(f"- {n}" for n in report.notes)
        parts.append("")
    if NOTES.exists():
        parts += ["## Analysis", "", NOTES.read_text().strip(), ""]
    text = "\n".join(parts)
    if write:
        target = RESULTS if full else RESULTS.with_name("RESULTS-partial.md")
        target.write_text(text)
    return text
