"""Test fixture: `pay` and `quote` print the amount they were given, as the tool received it."""

import json
import sys

action, argv = sys.argv[1], sys.argv[2:]
args = dict(zip(argv[::2], argv[1::2], strict=False))
print(json.dumps({"action": action, "argv": argv, "amount": args.get("--amount")}))
