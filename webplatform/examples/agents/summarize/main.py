"""summarize: a deterministic stand-in for an agent; same contract as a tool.

argv: `main.py summarize-text --text TEXT [--max-words N] [--max-sentences N]`.
Prints one JSON object; exit 0 ok, 2 for a call that needs fixing.
"""

import argparse
import json
import re
import sys

# A sentence ends at . ! ? or … followed by whitespace; good enough for a demo.
SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


class UsageError(Exception):
    """The call needs fixing; exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def positive(raw):
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"expected a whole number, got {raw!r}") from None
    if value < 1:
        raise UsageError(f"expected a number of at least 1, got {value}")
    return value


def summarize_text(args):
    text = " ".join(args.text.split())
    sentences = [s for s in SENTENCE_END.split(text) if s]
    words = text.split()
    picked = " ".join(sentences[: args.max_sentences]).split()
    summary_words = picked[: args.max_words]
    summary = " ".join(summary_words)
    truncated = len(summary_words) < len(words)
    if len(summary_words) < len(picked):
        summary += " …"
    return {
        "summary": summary,
        "words": len(words),
        "sentences": len(sentences),
        "truncated": truncated,
    }


def main():
    parser = Parser(prog="summarize")
    actions = parser.add_subparsers(dest="action", required=True)
    sub = actions.add_parser("summarize-text")
    sub.add_argument("--text", required=True)
    sub.add_argument("--max-words", type=positive, default=40)
    sub.add_argument("--max-sentences", type=positive, default=2)
    try:
        result = summarize_text(parser.parse_args())
    except UsageError as exc:
        print(json.dumps({"error": str(exc)}, ensure_ascii=False))
        print(f"summarize: error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
