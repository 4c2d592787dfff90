"""The results table, printed and written to bench/RESULTS.md with the date and machine."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bench.common import Report, machine, verdict

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
