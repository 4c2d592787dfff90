"""A link to PostgreSQL that silently drops every packet (a black hole), for real processes.

A process run inside a network namespace of its own (`BlackHole.enter`) reaches the test's
PostgreSQL only over a virtual Ethernet pair to a second namespace, where a forwarder relays
each connection to a Unix socket outside both (sockets keep their namespace, files do not),
and from there to the server. `black()` makes the forwarder's side drop every packet it
sends (a root `pfifo` queue of length 0 on its end of the pair) and stop relaying: nothing is
closed or refused, nothing the process sends is answered or even acknowledged, and its kernel
retransmits and probes into the void, as when a cable is pulled or a firewall starts dropping.
(Dropping on the process's own side would not do: its kernel would see a local queue refusing
a packet, not a lost one.) `mend()` lets packets and the relay through again. It needs root.

Run as a program (`python blackhole.py SOCKET PID`) inside the forwarder's namespace, it is
that forwarder: it links its namespace to PID's, prints the port it listens on, then obeys
`black` and `mend` lines on stdin.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve()
# The pair's two ends: the process's side and the forwarder's (a /30 of their own).
INSIDE, FORWARDER = "10.201.0.1", "10.201.0.2"
# The forwarder's end: a queue that holds no packet drops them all.
BLACK = ["tc", "qdisc", "replace", "dev", "bh1", "root", "pfifo", "limit", "0"]
MEND = ["tc", "qdisc", "del", "dev", "bh1", "root"]
# Set while the forwarder relays (cleared: it holds what it reads until mended).
flowing = threading.Event()
flowing.set()


def pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy `src` to `dst` until `src` ends, then end `dst`'s sending side."""
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            flowing.wait()
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def relay(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Forward every connection `listener` accepts to a new `connect()`, both ways."""
    with contextlib.suppress(OSError):
        while True:
            client, _ = listener.accept()
            upstream = connect()
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()


def _namespace_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


class BlackHole:
    """A network namespace whose one way out is a forwarder to PostgreSQL at `to`."""

    def __init__(self, to: tuple[str, int]) -> None:
        self._folder = tempfile.mkdtemp(prefix="aat-bh-")  # short: a socket path has 108 bytes
        path = os.path.join(self._folder, "pg")
        outside = socket.socket(socket.AF_UNIX)
        outside.bind(path)
        outside.listen(64)
        self._outside = outside
        threading.Thread(
            target=relay, args=(outside, lambda: socket.create_connection(to)), daemon=True
        ).start()
        self._inside = subprocess.Popen(["unshare", "--net", "sleep", "infinity"])
        # Linked only once it has its own namespace, or the pair would land in this one.
        deadline = time.monotonic() + 30
        while _namespace_of(self._inside.pid) == _namespace_of(os.getpid()):
            assert time.monotonic() < deadline, "unshare made no network namespace"
            time.sleep(0.01)
        self._forwarder = subprocess.Popen(
            ["unshare", "--net", sys.executable, str(HERE), path, str(self._inside.pid)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._forwarder.stdout is not None
        self.port = int(self._forwarder.stdout.readline())
        self.host = FORWARDER

    def enter(self) -> list[str]:
        """The command prefix that runs a program inside the namespace."""
        return ["nsenter", "--target", str(self._inside.pid), "--net", "--"]

    def _order(self, line: str) -> None:
        assert self._forwarder.stdin is not None and self._forwarder.stdout is not None
        self._forwarder.stdin.write(line + "\n")
        self._forwarder.stdin.flush()
        answer = self._forwarder.stdout.readline().strip()
        assert answer == "ok", f"the namespace's forwarder answered {answer!r} to {line!r}"

    def black(self) -> None:
        """Drop every packet from now on; every socket stays open."""
        self._order("black")

    def mend(self) -> None:
        """Let packets through again."""
        self._order("mend")

    def links(self) -> int:
        """How many connections to the forwarder the processes inside still hold open (their
        kernel has not given up on them)."""
        listing = subprocess.run(
            [*self.enter(), "ss", "-Htn", "state", "established", f"( dport = :{self.port} )"],
            capture_output=True,
            text=True,
            check=True,
        )
        return len(listing.stdout.splitlines())

    def close(self) -> None:
        """End the forwarder and the namespaces, and the outer relay."""
        for proc in (self._forwarder, self._inside):
            proc.kill()
            proc.wait(timeout=10)
        self._outside.close()
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self._folder, "pg"))
            os.rmdir(self._folder)


@contextlib.contextmanager
def black_hole(to: tuple[str, int]) -> Iterator[BlackHole]:
    """A `BlackHole` to `to`, closed after the block."""
    hole = BlackHole(to)
    try:
        yield hole
    finally:
        hole.close()


def _link(inside: str) -> None:
    """A virtual Ethernet pair from this namespace to that of process `inside`, addressed."""
    here = [
        ["ip", "link", "add", "bh1", "type", "veth", "peer", "name", "bh0", "netns", inside],
        ["ip", "addr", "add", f"{FORWARDER}/30", "dev", "bh1"],
        ["ip", "link", "set", "bh1", "up"],
    ]
    there = [
        ["ip", "addr", "add", f"{INSIDE}/30", "dev", "bh0"],
        ["ip", "link", "set", "bh0", "up"],
        ["ip", "link", "set", "lo", "up"],
    ]
    for command in here:
        subprocess.run(command, check=True)
    for command in there:
        subprocess.run(["nsenter", "--target", inside, "--net", "--", *command], check=True)


def _serve(path: str, inside: str) -> None:
    """The forwarder: linked to `inside`'s namespace, relaying to the Unix socket `path`."""
    _link(inside)
    listener = socket.create_server((FORWARDER, 0))

    def connect() -> socket.socket:
        upstream = socket.socket(socket.AF_UNIX)
        upstream.connect(path)
        return upstream

    threading.Thread(target=relay, args=(listener, connect), daemon=True).start()
    print(listener.getsockname()[1], flush=True)
    for line in sys.stdin:
        black = line.strip() == "black"
        if black:
            flowing.clear()
        done = subprocess.run(BLACK if black else MEND, capture_output=True, text=True)
        if not black:
            flowing.set()
        print("ok" if done.returncode == 0 else done.stderr.strip(), flush=True)


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
