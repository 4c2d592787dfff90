"""Test fixture: `publish` prints the branch and the target it was given (it has no default
of its own: the manifest's default is what it receives)."""

import json
import sys

argv = sys.argv[2:]
args = dict(zip(argv[::2], argv[1::2], strict=False))
print(json.dumps({"branch": args.get("--branch"), "target": args.get("--target")}))
