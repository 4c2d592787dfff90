"""Test fixture: a draft in `$AAT_HOME/data/drafts/draft.txt`, its preview and its publication.

`show` prints the draft as `publish` would publish it (and fails when there is none), `publish`
appends it to `published.txt`, and `edit` rewrites it: a reversible call that changes what the
irreversible one will do, after its preview ran.
"""

import json
import os
import sys
from pathlib import Path

FOLDER = Path(os.environ["AAT_HOME"], "data", "drafts")
DRAFT = FOLDER / "draft.txt"


def answer(value, code=0):
    print(json.dumps(value))
    sys.exit(code)


def main():
    action, rest = sys.argv[1], sys.argv[2:]
    if action == "edit":
        FOLDER.mkdir(parents=True, exist_ok=True)
        DRAFT.write_text(rest[rest.index("--text") + 1], encoding="utf-8")
        answer({"saved": True})
    try:
        text = DRAFT.read_text(encoding="utf-8")
    except FileNotFoundError:
        answer({"error": "there is no draft to publish"}, 1)
    if action == "show":
        answer({"would publish": text})
    with (FOLDER / "published.txt").open("a", encoding="utf-8") as out:
        out.write(text + "\n")
    answer({"published": text})


main()
