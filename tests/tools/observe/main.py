"""Test fixture: what a call observes; the same answers are required warm and plain."""

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time

VERSION = 1
LOADED = set(sys.modules)  # what this call's interpreter held once this file's imports ran
CALLS = globals().get("CALLS", 0) + 1  # 1 unless module globals survived an earlier call
json.__dict__["_aat_calls"] = json.__dict__.get("_aat_calls", 0) + 1  # a pre-imported module


def answer(value, code=0):
    print(json.dumps(value))
    sys.exit(code)


def observe():
    scratch = os.path.join(os.environ["TMPDIR"], "probe.txt")
    with open(scratch, "w") as f:
        f.write("scratch")
    answer(
        {
            "argv": sys.argv,
            "file": __file__,
            "name": __name__,
            "path0": sys.path[0],
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "pid": os.getpid(),
            "pgid": os.getpgid(0),
            "sid": os.getsid(0),
            "tempfile": tempfile.gettempdir(),
            "fds": sorted(os.listdir("/proc/self/fd")),
            "threads": threading.active_count(),
            "calls": CALLS,
            "json_calls": json.__dict__["_aat_calls"],
            "stdin_tty": os.isatty(0),
            "stdout_encoding": sys.stdout.encoding,
            "write_through": sys.stdout.write_through,
        }
    )


def fork():
    pid = os.fork()
    if pid == 0:
        os.write(1, b"")
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    answer({"child_exit": os.waitstatus_to_exitcode(status)})


def setsid():
    try:
        os.setsid()
    except OSError as exc:
        answer({"setsid": exc.strerror})
    answer({"setsid": "ok"})


def leak():
    keep = [open(__file__), os.pipe()]  # noqa: SIM115 - left open on purpose
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()

    def late():
        time.sleep(0.2)
        print("late thread done", file=sys.stderr)

    threading.Thread(target=late).start()
    answer({"leaked": len(keep)})


def imports():
    # argparse imports more as it works (shutil, textwrap, gettext's locale): a warm
    # interpreter has them already, so the call imports nothing.
    parser = argparse.ArgumentParser(prog="observe", description="what a call imports")
    parser.add_argument("--name", help="who")
    parser.parse_args([])
    parser.format_help()
    answer({"imported": sorted(set(sys.modules) - LOADED)})


def kill_parent():
    try:
        os.kill(os.getppid(), signal.SIGKILL)
    except OSError as exc:
        answer({"kill": exc.strerror})
    answer({"kill": "sent"})


action = sys.argv[1]
if action == "observe":
    observe()
elif action == "fork":
    fork()
elif action == "setsid":
    setsid()
elif action == "exit3":
    print(json.dumps({"error": "asked to exit 3"}))
    sys.exit(3)
elif action == "os-exit":
    sys.stdout.write('{"partial": ')
    os._exit(5)
elif action == "stdin":
    answer({"stdin": sys.stdin.read()})
elif action == "flood":
    sys.stdout.write("x" * 10_000_000)
elif action == "leak":
    leak()
elif action == "imports":
    imports()
elif action == "kill-parent":
    kill_parent()
elif action == "nap":
    started = time.time()
    time.sleep(0.5)
    answer({"pid": os.getpid(), "started": started, "ended": time.time()})
elif action == "version":
    answer({"version": VERSION})
