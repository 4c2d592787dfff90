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


def explain(reach: NetworkReach, error: str) -> str | None:
    """The sentence to add to a failed call's `error` when `reach` may be why; else None."""
    if reach.any:
        return None
    denied = bool(_PERMISSION.search(error) and _SOCKET_WORDS.search(error))
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
