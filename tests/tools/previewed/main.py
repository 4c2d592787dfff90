"""Test fixture: previews of every shape, and previews that misbehave (SPEC §16).

Every `send-*` action prints {"sent": true}; each preview prints what its name says.
"""

import json
import os
import sys
import time
from pathlib import Path


def answer(value, code=0):
    print(json.dumps(value))
    sys.exit(code)


def try_write(folder):
    """Plant a file in `folder`: "wrote" or the OS's refusal."""
    target = Path(folder) / "preview-probe.txt"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("written by a preview")
    except OSError as exc:
        return f"refused: {exc.strerror}"
    return "wrote"


def write(text):
    """Try scratch, the folder the manifest declares in `writes:`, and the folder `text`."""
    places = {
        "scratch": os.environ["TMPDIR"],
        "declared": str(Path(os.environ["AAT_HOME"], "data", "previewed")),
    }
    if text:
        places["given"] = text
    answer({name: try_write(folder) for name, folder in places.items()})


def preview(action, text):
    if action == "show-diff":
        diff = f"--- a/note.txt\n+++ b/note.txt\n@@ -1 +1 @@\n-old line\n+{text}\n kept\n"
        answer({"diff": diff})
    if action == "show-table":
        answer({"rows": [{"name": "first", "value": text}, {"name": "second", "value": 2}]})
    if action == "show-json":
        answer({"would send": text, "count": 1})
    if action == "hang":
        time.sleep(3600)
    if action == "flood":
        sys.stdout.write('{"junk": "' + "x" * (10 * 1024 * 1024) + '"}')
        sys.exit(0)
    if action == "fail":
        print(f"cannot preview {text}", file=sys.stderr)
        answer({"error": f"the preview of {text} broke"}, 1)
    if action == "html":
        print(f"<html><body><script>alert('{text}')</script></body></html>")
        sys.exit(0)
    if action == "write":
        write(text)
    answer({"sent": True})


def main():
    action, rest = sys.argv[1], sys.argv[2:]
    text = rest[rest.index("--text") + 1] if "--text" in rest else ""
    preview(action, text)


main()
