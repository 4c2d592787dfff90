"""Confinement of tool processes (SPEC §14, §17): namespaces of their own and Landlock keep
every tool away from aat itself and from what it did not declare.

`Fence` is what a host protects and where tools may work; `lock()` turns it into a `Jail`
for one run (scratch folder, paths, network, what confines the child), or raises
`NotStarted` with a one-line reason not to run. `namespaces.py` builds the tools' view of
the files and their network once per spawner, `landlock.py` the rules each call's child
enforces.
"""

from webplatform.process.confine.fence import (
    Fence,
    NotStarted,
    Workspaces,
    workspace_problem,
    workspaces_for,
)
from webplatform.process.confine.jail import (
    NO_NAMESPACES,
    UNAVAILABLE,
    Jail,
    available,
    lock,
    namespaces_problem,
    startup_note,
)
from webplatform.process.confine.reach import explain as explain_network

__all__ = [
    "NO_NAMESPACES",
    "UNAVAILABLE",
    "Fence",
    "Jail",
    "NotStarted",
    "Workspaces",
    "available",
    "explain_network",
    "lock",
    "namespaces_problem",
    "startup_note",
    "workspace_problem",
    "workspaces_for",
]
