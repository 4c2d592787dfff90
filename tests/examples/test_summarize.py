"""summarize: the example agent follows the same contract as tools."""

from __future__ import annotations

from example_support import RunExample

TEXT = "Žluťoučký kůň úpěl. Ďábelské ódy zněly! Třetí věta se nevejde? Ne."


def test_summary_is_the_first_sentences_with_counts(run_example: RunExample) -> None:
    res = run_example("summarize", "summarize-text", {"text": TEXT}, kind="agent")
    assert res.outcome == "succeeded", res.error
    assert res.result == {
        "summary": "Žluťoučký kůň úpěl. Ďábelské ódy zněly!",
        "words": 11,
        "sentences": 4,
        "truncated": True,
    }


def test_max_words_caps_the_summary(run_example: RunExample) -> None:
    args = {"text": TEXT, "max-words": 2}
    res = run_example("summarize", "summarize-text", args, kind="agent")
    assert res.result is not None
    assert res.result["summary"] == "Žluťoučký kůň …"


def test_short_text_is_not_truncated(run_example: RunExample) -> None:
    res = run_example("summarize", "summarize-text", {"text": "Hi there."}, kind="agent")
    assert res.result == {"summary": "Hi there.", "words": 2, "sentences": 1, "truncated": False}


def test_zero_words_is_a_usage_error(run_example: RunExample) -> None:
    res = run_example("summarize", "summarize-text", {"text": "x", "max-words": 0}, kind="agent")
    assert res.outcome == "usage_error"
