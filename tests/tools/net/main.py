"""Test fixture: tries to reach the network and this user's sockets; prints what the OS answered.

Exit 0 with {"reached": ...} when an attempt worked; exit 1 with the OS error otherwise.
"""

import json
import socket
import sys


def answer(value, code=0):
    print(json.dumps(value))
    sys.exit(code)


def attempt(what, reach):
    try:
        reach()
    except OSError as exc:
        answer({"error": f"{what}: {exc.strerror or exc}"}, 1)
    answer({"reached": what})


def connect(port):
    socket.create_connection(("127.0.0.1", int(port)), timeout=5).close()


def unix(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)


def listen(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", int(port)))
        sock.listen()


def udp(port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"from the tool", ("127.0.0.1", int(port)))


def terse(reach):
    """What many tools do: print the exception's one line, no traceback, no context."""
    try:
        reach()
    except OSError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
    answer({"reached": True})


action, rest = sys.argv[1], sys.argv[2:]
opts = dict(zip(rest[::2], rest[1::2], strict=False))
target = opts["--target"]
if action == "connect":
    attempt(f"connect 127.0.0.1:{target}", lambda: connect(target))
elif action == "unix":
    attempt(f"connect {target}", lambda: unix(target))
elif action == "abstract":
    attempt(f"connect @{target}", lambda: unix("\0" + target))
elif action == "listen":
    attempt(f"listen on 127.0.0.1:{target}", lambda: listen(target))
elif action == "udp":
    attempt(f"send to udp 127.0.0.1:{target}", lambda: udp(target))
elif action == "terse":
    terse(lambda: connect(target))
elif action == "terse-open":
    terse(lambda: open(target, "ab").close())
