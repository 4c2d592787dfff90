"""A job's preview (SPEC §16) as the approval card and the job page show it.

Plain data, no HTML: the template escapes every string it prints. How the answer is shown
depends on its shape: `{"diff": "..."}` as a diff (each line marked added, removed, hunk or
file header), an object holding one list of objects (or such a list) as a table, anything
else as pretty JSON; a preview that failed shows its error and what it printed, as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from webplatform.store.models import JobPreview

Shape = Literal["none", "diff", "table", "json", "text"]

# A card shows a preview whole when it is at most this long; the job page always does.
CARD_CHARS = 8000
# A preview still `pending` this long after its job was queued will not land: the process
# that ran it stopped (previews wait their turn, so this is well past the timeout).
STALE_AFTER = timedelta(minutes=2)


@dataclass(frozen=True)
class PreviewView:
    """What the template needs: state, error, and the answer in the one shape it shows."""

    action: str
    state: str  # pending | stale | succeeded | failed | timed_out
    error: str | None = None
    shape: Shape = "none"
    text: str = ""
    diff: list[tuple[str, str]] = field(default_factory=list)
    caption: str | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    # The rest of a diff answer besides `diff`, as pretty JSON ("" when there is none).
    extra: str = ""
    truncated: bool = False
    # The card shows only the head of a preview this long (`size` characters in all).
    clipped: bool = False
    size: int = 0
    # The digest an approval from this page binds (SPEC §20), and when a worker found the
    # preview changed since an approval (None: it never did).
    digest: str = ""
    changed_at: datetime | None = None


def preview_view(
    row: JobPreview,
    output: str | None,
    *,
    size: int | None = None,
    limit: int | None = None,
    now: datetime | None = None,
) -> PreviewView:
    """The view of one preview row; `output` may be only the head of a `size`-long output,
    and a card passes `limit` to show a long one as its first `limit` characters of text."""
    size = len(output or "") if size is None else size
    state = row.state
    if state == "pending" and (now or datetime.now(UTC)) - row.created_at > STALE_AFTER:
        state = "stale"
    base = PreviewView(
        action=row.action,
        state=state,
        error=row.error,
        truncated=row.truncated,
        size=size,
        digest=row.digest or "",
        changed_at=row.changed_at,
    )
    if not output:
        return base
    if limit is not None and size > limit:
        return replace(base, shape="text", text=output[:limit], clipped=True)
    if row.state != "succeeded":
        return replace(base, shape="text", text=output)
    try:
        answer = json.loads(output)
    except json.JSONDecodeError:
        return replace(base, shape="text", text=output)
    return _shaped(base, answer)


def _shaped(base: PreviewView, answer: Any) -> PreviewView:
    if isinstance(answer, dict) and isinstance(answer.get("diff"), str):
        rest = {k: v for k, v in answer.items() if k != "diff"}
        return replace(
            base,
            shape="diff",
            diff=[(_diff_class(line), line) for line in answer["diff"].splitlines()],
            extra=_pretty(rest) if rest else "",
        )
    caption, items = _table_of(answer)
    if items:
        columns = list(dict.fromkeys(key for item in items for key in item))
        rows = [[_cell(item.get(c)) for c in columns] for item in items]
        return replace(base, shape="table", caption=caption, columns=columns, rows=rows)
    return replace(base, shape="json", text=_pretty(answer))


def _table_of(answer: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """The list of objects to show as a table, and its name: the answer itself, or the one
    value of an object with a single key; else nothing."""
    caption = None
    if isinstance(answer, dict) and len(answer) == 1:
        caption, answer = next(iter(answer.items()))
    if isinstance(answer, list) and answer and all(isinstance(i, dict) for i in answer):
        return caption, answer
    return None, []


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "diff-file"
    if line.startswith("@@"):
        return "diff-hunk"
    if line.startswith("+"):
        return "diff-add"
    if line.startswith("-"):
        return "diff-del"
    return "diff-same"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
