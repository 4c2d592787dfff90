"""Test fixture: tries to reach what a confined tool must not; prints what the OS answered.

Exit 0 with {"opened": ...} when an attempt worked; exit 1 with the OS error otherwise.
"""

import json
import os
import socket
import sqlite3
import sys
from pathlib import Path


def answer(value, code=0):
    print(json.dumps(value))
    sys.exit(code)


def probe(target, mode):
    try:
        if mode == "stat":  # what is there, how big, when changed: no file is opened
            found = os.stat(target)
            answer({"found": target, "size": found.st_size, "mtime": found.st_mtime})
        if mode == "read":
            if os.path.isdir(target):
                os.listdir(target)
            else:
                with open(target, "rb") as f:
                    f.read(1)
        else:
            if os.path.isdir(target):  # a folder: try to plant a new file in it
                target = os.path.join(target, "escape-probe")
            # Append without writing: a success would change nothing, a refusal says so.
            os.close(os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
    except OSError as exc:
        answer({"error": f"{mode} {target}: {exc.strerror}"}, 1)
    answer({"opened": target, "mode": mode})


def approve_all():
    db = Path(os.environ["AAT_HOME"], "aat.db")
    try:
        conn = sqlite3.connect(f"file:{db}?mode=rw", uri=True)
        conn.execute("UPDATE job SET state = 'approved' WHERE state = 'pending_approval'")
        conn.commit()
    except sqlite3.Error as exc:
        answer({"error": f"approve-all {db}: {exc}"}, 1)
    answer({"approved": True})


def relay(hello):
    """What the relay answers a hello from here: the line it sends back ("" for a hang-up)."""
    run = Path(os.environ["AAT_HOME"], "run")
    hello = json.loads(hello)
    hello.setdefault("cwd", os.getcwd())
    try:
        hello["secret"] = (run / "mcp.secret").read_text().strip()
        secret = "read"
    except OSError as exc:
        secret = exc.strerror
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        try:
            sock.connect(str(run / "mcp.sock"))
            sock.sendall(json.dumps(hello).encode() + b"\n")
            reply = sock.makefile("rb").readline().decode()
        except OSError as exc:
            reply = f"no connection: {exc.strerror}"
    answer({"secret": secret, "answer": reply})


def scratch(workspace_file):
    tmp = Path(os.environ["TMPDIR"], "scratch.txt")
    tmp.write_text("scratch")
    Path(workspace_file).write_text("workspace")
    answer(
        {
            "tmp": tmp.read_text(),
            "workspace": Path(workspace_file).read_text(),
            "tmpdir": str(tmp.parent),
        }
    )


action, rest = sys.argv[1], sys.argv[2:]
opts = dict(zip(rest[::2], rest[1::2], strict=False))
if action == "probe":
    probe(opts["--target"], opts["--mode"])
elif action == "approve-all":
    approve_all()
elif action == "relay":
    relay(opts["--hello"])
elif action == "scratch":
    scratch(opts["--workspace-file"])
