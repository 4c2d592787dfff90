"""Test fixture: prints its argv (after the script), environment, cwd and stdin as one object."""

import json
import os
import sys

print(
    json.dumps(
        {
            "argv": sys.argv[1:],
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "stdin": sys.stdin.read(),
        },
        ensure_ascii=False,
    )
)
