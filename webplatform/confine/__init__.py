"""Confinement of tool processes (SPEC §14): Landlock keeps every tool away from aat itself.

`Fence` is what a host protects and where tools may work; `lock()` turns it into a `Jail`
for one run (scratch folder, rules, what confines the child) or a one-line reason not to run.
"""

from webplatform.confine.fence import Fence, Workspaces, workspace_problem, workspaces_for
from webplatform.confine.jail import UNAVAILABLE, Jail, available, lock

__all__ = [
    "UNAVAILABLE",
    "Fence",
    "Jail",
    "Workspaces",
    "available",
    "lock",
    "workspace_problem",
    "workspaces_for",
]
