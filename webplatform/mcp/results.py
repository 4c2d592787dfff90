"""Turning answers into MCP tool results: JSON as structuredContent and as text, capped.

A result lands in a model's context, so it is capped at `AAT_RESULT_MAX_BYTES`. Lists inside
the tool's result are shortened first (the answer stays valid, structured JSON); what is still
too big becomes a text preview. Either way the answer says it was truncated and names the
arguments of that action that would narrow it.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult, TextContent

from webplatform.jobs.answers import NOT_ERRORS, Answer, Status
from webplatform.registry.model import ActionSpec

# Argument names that, by convention, make a tool's answer smaller.
_NARROWING_WORDS = (
    "max", "limit", "page", "offset", "cursor", "filter", "query", "search", "sheet", "range",
    "fields", "columns", "rows", "since", "until", "start", "end", "first", "last", "top", "save",
)  # fmt: skip
_PREVIEW_MIN = 200


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))


def tool_result(body: dict[str, Any], *, is_error: bool, text: str | None = None) -> CallToolResult:
    """A tool result carrying `body` as structuredContent and as its JSON text (`text`, when
    the caller has it already)."""
    if text is None:
        text = json.dumps(body, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=body,
        is_error=is_error,
    )


def answer_result(
    answer: Answer, *, max_bytes: int, action: ActionSpec | None = None
) -> CallToolResult:
    """The MCP result for a run-style answer: `isError` per SPEC section 5, capped."""
    body = cap_answer(answer.to_dict(), max_bytes=max_bytes, action=action)
    return tool_result(body, is_error=answer.status not in NOT_ERRORS)


def plain_result(body: dict[str, Any], *, max_bytes: int) -> CallToolResult:
    """The MCP result for a discovery or skill body; an `invalid` body is an error."""
    is_error = body.get("status") == Status.invalid.value
    text = json.dumps(body, ensure_ascii=False)
    if len(text.encode("utf-8")) <= max_bytes:
        return tool_result(body, is_error=is_error, text=text)
    return tool_result(_fit_listing(body, max_bytes), is_error=is_error)


def _fit_listing(body: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """A discovery body cut to `max_bytes`: its longest list keeps the entries that fit, and
    the answer says how many there were and how to narrow the call. A body that still does
    not fit becomes a text preview."""
    out = dict(body)
    out["truncated"] = True
    notes: list[str] = []
    for _ in range(4):  # a list at a time, longest first
        over = _size({**out, "note": "; ".join(notes)}) - max_bytes
        lists = [(k, v) for k, v in out.items() if isinstance(v, list) and len(v) > 1]
        if over <= 0 or not lists:
            break
        key, items = max(lists, key=lambda kv: _size(kv[1]))
        kept = len(items)
        while kept > 1 and over > 0:
            kept -= 1
            over -= _size(items[kept]) + 2
        out[key] = items[:kept]
        notes.append(
            f"showing {kept} of {len(items)} {key}: call capabilities with search=<words> "
            "(or kind=...) to narrow"
        )
    out["note"] = "; ".join(notes) or "answer truncated: narrow the call"
    if _size(out) <= max_bytes:
        return out
    note = "answer truncated: narrow the call"
    return _preview({"truncated": True, "note": note, "body": body}, "body", max_bytes, note=note)


def narrowing_args(action: ActionSpec | None) -> list[str]:
    """The optional arguments of `action` that look like they make its answer smaller."""
    if action is None:
        return []
    optional = [a.name for a in action.args if not a.required]
    picked = [
        n
        for n in optional
        if any(w in n.lower().split("-") or w in n.lower() for w in _NARROWING_WORDS)
    ]
    return picked or optional


def _note(action: ActionSpec | None, original: int, max_bytes: int) -> str:
    args = narrowing_args(action)
    how = (
        f"narrow the call with {', '.join(args)}"
        if args
        else "this action has no arguments that narrow its answer"
    )
    return (
        f"result truncated: it was {original} bytes, over the {max_bytes}-byte limit "
        f"(AAT_RESULT_MAX_BYTES); {how}"
    )


def cap_answer(
    body: dict[str, Any], *, max_bytes: int, action: ActionSpec | None = None
) -> dict[str, Any]:
    """`body` unchanged when it fits, else with its lists shortened or its result previewed."""
    original = _size(body)
    if original <= max_bytes:
        return body
    note = _note(action, original, max_bytes)
    if body.get("note"):  # the answer's own note (a folder left out) stays first
        note = f"{body['note']}; {note}"
    body = dict(body)
    body["truncated"] = True
    body["note"] = note
    if "result" in body:
        body["result"] = _shrink_lists(body["result"], body, max_bytes)
        if _size(body) <= max_bytes:
            return body
    for limit in (max_bytes // 4, 2_000, 300, 80):
        clipped: dict[str, Any] = _clip(body, max(limit, 40))
        if _size(clipped) <= max_bytes:
            return clipped
    body = _clip(body, 80)
    field = "result" if "result" in body else "schema"
    return _preview(body, field, max_bytes, note=note)


def _clip(value: Any, limit: int) -> Any:
    """Every string (dict keys included) cut to `limit` characters, marked with an ellipsis."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if isinstance(value, dict):
        return {_clip(str(k), limit): _clip(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip(v, limit) for v in value]
    return value


def _shrink_lists(value: Any, body: dict[str, Any], max_bytes: int) -> Any:
    """Halve the longest list (top level or one level down) until the whole body fits."""
    value = _copy_two_levels(value)
    for _ in range(64):
        target = _longest_list(value)
        if target is None:
            break
        holder, key, items = target
        if len(items) <= 1:
            break
        holder[key] = items[: len(items) // 2]
        body["result"] = value
        if _size(body) <= max_bytes:
            break
    return value


def _copy_two_levels(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in value.items()}
    return value


def _longest_list(value: Any) -> tuple[dict[str, Any], str, list[Any]] | None:
    candidates: list[tuple[dict[str, Any], str, list[Any]]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, list):
                candidates.append((value, k, v))
            elif isinstance(v, dict):
                candidates.extend((v, k2, v2) for k2, v2 in v.items() if isinstance(v2, list))
    if not candidates:
        return None
    return max(candidates, key=lambda c: _size(c[2]))


def _preview(body: dict[str, Any], field: str, max_bytes: int, *, note: str) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k != field}
    out["truncated"] = True
    out.setdefault("note", note)
    room = max(_PREVIEW_MIN, max_bytes - _size(out) - 64)
    text = json.dumps(body.get(field), ensure_ascii=False)
    out[f"{field}_preview"] = text.encode("utf-8")[:room].decode("utf-8", errors="ignore")
    return out
