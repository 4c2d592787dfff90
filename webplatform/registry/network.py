"""The manifest's `network:` key (SPEC §17): what a tool may reach on the network.

network: none                       # the default: no network but its own loopback
network: {connect: [443, 5432]}     # TCP connections to these ports only
network: {bind: [8080]}             # listening on these ports only (both keys may be given)
network: any                        # connect and listen anywhere
"""

from __future__ import annotations

from typing import Any

from webplatform.registry.checks import Collector, did_you_mean
from webplatform.registry.model import NetworkReach

NETWORK_KEYS = ("connect", "bind")
_WORDS = ("none", "any")
_SHAPE = "none, any, or ports such as `{connect: [443]}` or `{bind: [8080]}`"


def network_reach(check: Collector, data: dict[Any, Any]) -> NetworkReach:
    """The manifest's `network:`; a wrong value is reported on `check` (and reads as none)."""
    raw = data.get("network")
    if raw is None or raw == "none":
        return NetworkReach()
    if raw == "any":
        return NetworkReach(any=True)
    if isinstance(raw, str):
        check.fail(
            f"network '{raw}' is not known{did_you_mean(raw, _WORDS)} (or give ports, "
            "e.g. `network: {connect: [443]}`)",
            ("network",),
        )
        return NetworkReach()
    if not isinstance(raw, dict) or not raw:
        check.fail(f"`network` must be {_SHAPE}", ("network",))
        return NetworkReach()
    check.unknown_keys(raw, NETWORK_KEYS, "`network`", ("network",))
    connect = _ports(check, raw, "connect")
    bind = _ports(check, raw, "bind")
    return NetworkReach(connect=connect, bind=bind)


def _ports(check: Collector, raw: dict[Any, Any], key: str) -> tuple[int, ...]:
    """`connect:` or `bind:`, a non-empty list of distinct TCP ports."""
    value = raw.get(key)
    if value is None:
        return ()
    where = ("network", key)
    if not isinstance(value, list) or not value:
        check.fail(f"`network.{key}` must be a list of TCP ports, e.g. `{key}: [443]`", where)
        return ()
    ports: list[int] = []
    for i, port in enumerate(value):
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            check.fail(
                f"`network.{key}` entry {port!r} is not a TCP port (1 to 65535)", (*where, i)
            )
        elif port in ports:
            check.fail(f"port {port} is listed twice in `network.{key}`; remove one", (*where, i))
        else:
            ports.append(port)
    return tuple(ports)
