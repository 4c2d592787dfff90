"""Why a tool's connection failed, when its manifest's `network:` is the reason (SPEC §17).

A tool denied a connection gets the operating system's refusal: in a network of its own
(`network: none`) nothing answers (`Connection refused`, `Network is unreachable`, no name
resolution), and Landlock refuses a port not declared (`Permission denied`). Those words
are all the runner sees of it, so a failed call whose error carries them gets one more
sentence: its manifest allows no such connection, and how to declare one.
"""

from __future__ import annotations

import re

from webplatform.registry.model import NetworkReach

# What a socket call reports in a network namespace with nothing but its own loopback.
_NO_NETWORK = re.compile(
    r"connection refused|network is unreachable|no route to host|"
    r"temporary failure in name resolution|name or service not known|"
    r"name resolution|cannot assign requested address|errno 11[013]\b|errno 101\b",
    re.IGNORECASE,
)
# What Landlock's TCP rules report: EACCES from connect(2) or bind(2).
_PERMISSION = re.compile(r"permission denied|errno 13\b", re.IGNORECASE)
_SOCKET_WORDS = re.compile(
    r"connect|bind|listen|socket|port|urlopen|connection|address|http|tcp", re.IGNORECASE
)
# A refusal that names no file: Python names the file of every refused open, chmod or
# listdir (`Permission denied: '/etc/shadow'`) and never a socket's; a shell or a C tool
# names the file before it (`cat: /x: Permission denied`).
_BARE_REFUSAL = re.compile(
    r"^(?:exit \d+: |killed by signal [^:]*: )?(?:[\w.]+(?:Error|Exception):\s*)?"
    r"(?:\[Errno 13\]\s*)?Permission denied\s*$",
    re.IGNORECASE,
)
# A refusal that names its file after it.
_FILE_NAMED = re.compile(r"Permission denied: \S", re.IGNORECASE)
# A traceback frame or call of a socket: where a refusal came from, when the line says not.
_SOCKET_FRAME = re.compile(
    r"socket\.py|\.connect(?:_ex)?\(|\.bind\(|create_connection|urlopen|"
    r"http/client\.py|urllib3?/|requests/|httpx/|ssl\.py",
    re.IGNORECASE,
)


def explain(reach: NetworkReach, error: str, stderr: str = "") -> str | None:
    """The sentence to add to a failed call's `error` when `reach` may be why; else None.

    `stderr` (its tail) shows where a bare `Permission denied` came from: a socket frame
    there, or a refusal that names no file at all, is taken for a refused connection.
    """
    if reach.any:
        return None
    denied = bool(_PERMISSION.search(error)) and bool(
        _SOCKET_WORDS.search(error) or _socket_refusal(error, stderr)
    )
    if reach.none and (denied or _NO_NETWORK.search(error)):
        return (
            "its manifest allows no network connection (`network: none`, the default); "
            "declare the ports it needs, e.g. `network: {connect: [443]}`, or `network: any`"
        )
    if denied:
        return (
            f"its manifest allows only `network: {{{_ports(reach)}}}`; add the port it needs "
            "to `connect:` (or to `bind:` to listen), or declare `network: any`"
        )
    return None


def _ports(reach: NetworkReach) -> str:
    parts = [
        f"{key}: [{', '.join(map(str, ports))}]"
        for key, ports in (("connect", reach.connect), ("bind", reach.bind))
        if ports
    ]
    return ", ".join(parts)


def _socket_refusal(error: str, stderr: str) -> bool:
    """Whether a `Permission denied` in `error` came from a socket call: the refusal names
    no file, or the traceback in `stderr` runs through a socket."""
    last = error.strip().rsplit("\n", 1)[-1]
    if _FILE_NAMED.search(last):
        return False
    return bool(_BARE_REFUSAL.search(last) or _SOCKET_FRAME.search(stderr))
