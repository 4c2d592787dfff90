"""Test fixture: misbehaves in the way its action names.

Pid files go to $AAT_HOME/data/misbehave.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SLEEPER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"


def spawn_sleeper(name):
    child = subprocess.Popen([sys.executable, "-c", SLEEPER])
    Path(os.environ["AAT_HOME"], "data", "misbehave", f"{name}.pid").write_text(str(child.pid))


action = sys.argv[1]
if action == "hang":
    time.sleep(600)
elif action == "crash":
    print("about to fail", file=sys.stderr)
    raise ZeroDivisionError("division by zero in the fixture")
elif action == "garbage":
    print("Hello, I am not JSON")
elif action == "not-object":
    print(json.dumps([1, 2, 3]))
elif action == "silent":
    pass
elif action == "flood":
    block = "x" * 1_000_000 + "\n"
    for _ in range(50):
        sys.stdout.write(block)
        sys.stderr.write(block)
    sys.stderr.write("END-OF-STDERR\n")
elif action == "usage":
    print(json.dumps({"error": "unknown --colour; did you mean --color?"}))
    sys.exit(2)
elif action == "fail-json":
    print(json.dumps({"error": "remote answered 403 Forbidden"}))
    print("request to https://example.invalid failed", file=sys.stderr)
    sys.exit(3)
elif action == "signal":
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
elif action == "grandchild":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    spawn_sleeper("grandchild")
    time.sleep(600)
elif action == "stray":
    spawn_sleeper("stray")
    print(json.dumps({"ok": True}))
