"""Test fixture: prints LEAK_TOKEN between `pad` and `after` characters, where it is told."""

import argparse
import json
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("action")
parser.add_argument("--where", required=True)
parser.add_argument("--pad", type=int, required=True)
parser.add_argument("--after", type=int, default=0)
ns = parser.parse_args()
text = "p" * ns.pad + os.environ["LEAK_TOKEN"] + "q" * ns.after
if ns.where == "stdout":
    sys.stdout.write(text)
elif ns.where == "stderr":
    sys.stderr.write(text)
    sys.exit(1)
elif ns.where == "error":
    print(json.dumps({"error": text}))
    sys.exit(1)
else:
    print(json.dumps({"text": text}))
