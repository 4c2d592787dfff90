"""outbox: one file per message in $AAT_HOME/outbox, listed and deleted."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from example_support import RunExample, load_example

from webplatform.process import runner


def test_send_writes_exactly_one_file_per_message(run_example: RunExample, home: Path) -> None:
    args = {"to": "eva@example.org", "subject": "Příliš žluťoučký", "body": "Ahoj\nsvěte"}
    first = run_example("outbox", "send-message", args)
    second = run_example("outbox", "send-message", {**args, "subject": "again"})
    assert first.outcome == second.outcome == "succeeded", first.error
    files = sorted((home / "outbox").iterdir())
    assert len(files) == 2
    assert first.result is not None and second.result is not None
    assert first.result["sent"] is True
    assert {first.result["file"], second.result["file"]} == {str(f) for f in files}
    saved = json.loads(Path(first.result["file"]).read_text(encoding="utf-8"))
    assert saved["id"] == first.result["id"]
    assert (saved["to"], saved["subject"], saved["body"]) == (
        "eva@example.org",
        "Příliš žluťoučký",
        "Ahoj\nsvěte",
    )


def test_delay_holds_the_send_and_writes_nothing_before(
    run_example: RunExample, home: Path
) -> None:
    started = time.monotonic()
    res = run_example(
        "outbox", "send-message", {"to": "a", "subject": "s", "body": "b", "delay-s": 0.4}
    )
    assert res.outcome == "succeeded", res.error
    assert time.monotonic() - started >= 0.4
    assert len(list((home / "outbox").iterdir())) == 1


def test_a_timed_out_send_writes_nothing(home: Path) -> None:
    tool = load_example("tool", "outbox")
    spec = tool.action("send-message")
    assert spec is not None
    args = {"to": "a", "subject": "s", "body": "b", "delay-s": 30}
    quick = dataclasses.replace(spec, timeout_s=0.5)
    res = runner.run(runner.ToolCall(tool, quick, args, home=home))
    assert res.outcome == "timed_out"
    assert not (home / "outbox").exists() or not list((home / "outbox").iterdir())


def test_list_then_delete(run_example: RunExample, home: Path) -> None:
    empty = run_example("outbox", "list-messages")
    assert empty.result == {"messages": []}
    for n in range(3):
        run_example("outbox", "send-message", {"to": "x", "subject": f"s{n}", "body": "b"})
    listed = run_example("outbox", "list-messages")
    assert listed.result is not None
    assert [m["subject"] for m in listed.result["messages"]] == ["s0", "s1", "s2"]
    deleted = run_example("outbox", "delete-messages")
    assert deleted.result == {"deleted": 3}
    assert list((home / "outbox").iterdir()) == []


def test_negative_delay_is_a_usage_error(run_example: RunExample, home: Path) -> None:
    res = run_example(
        "outbox", "send-message", {"to": "a", "subject": "s", "body": "b", "delay-s": -1}
    )
    assert res.outcome == "usage_error"
    assert res.error is not None and "--delay-s" in res.error
    # aat creates the declared `writes:` folder before the run; no message may be in it.
    assert not (home / "outbox").exists() or not list((home / "outbox").iterdir())
