"""Test fixture: each action tries to take the host down one way, and stops on its own (a
bounded amount, a deadline) so that a test with the limit switched off fails rather than
harms the machine."""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

action = sys.argv[1]
MB = 1 << 20


def answer(value: dict) -> None:
    print(json.dumps(value))


if action == "fork-bomb":
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.fork()
        except OSError:
            time.sleep(0.001)
    os._exit(0)
elif action == "balloon":
    held = bytearray(2048 * MB)
    held[:: 4096 * 64] = b"x" * len(held[:: 4096 * 64])  # touch some of it
    answer({"allocated_mb": len(held) // MB})
elif action == "big-file":
    with open(os.path.join(tempfile.gettempdir(), "big"), "wb") as f:
        for _ in range(64):
            f.write(b"x" * MB)
            f.flush()
    answer({"written_mb": f.tell() // MB})
elif action == "fill-scratch":
    for written in range(1, 65):
        with open(os.path.join(tempfile.gettempdir(), f"part{written}"), "wb") as f:
            f.write(b"x" * MB)
    answer({"written_mb": written})
elif action == "fd-leak":
    held = [open(os.devnull, "rb") for _ in range(4096)]  # noqa: SIM115 - held on purpose
    answer({"open": len(held)})
elif action == "orphan":
    tag = sys.argv[sys.argv.index("--tag") + 1]
    code = f"import time; time.sleep(60)  # {tag}"
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    answer({"child": child.pid})
elif action == "procs":
    answer({"procs": sorted(int(n) for n in os.listdir("/proc") if n.isdigit()), "me": os.getpid()})
elif action == "threads":
    gate = threading.Event()
    started = [threading.Thread(target=gate.wait) for _ in range(8)]
    for thread in started:
        thread.start()
    gate.set()
    answer({"threads": len(started)})
