"""Who may do what: the one authority question, `may(actor, permission, target)`.

Every route, page, command and the run form asks here, and nowhere else spells a role: an
operator's role (`admin`, `approver`, `viewer`, as the store keeps it) grants a set of named
`Permission`s, and pages receive the answers as booleans (`can`). Where a permission is about
one thing that has its own standing, the `target` answers the rest: a job's approve, deny
and edit go on to `webplatform.trust.decidability` (state, expiry, self-approval, approvals
still needed), which asks this module only whether the role decides at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from webplatform.store.operators import RoleBook


class Permission(StrEnum):
    """What an operator may be allowed to do."""

    view = "view"
    run = "run"
    approve = "approve"
    deny = "deny"
    edit = "edit"
    make_rules = "make rules"
    manage_operators = "manage operators"
    mint_tokens = "mint tokens"
    allow_sign_in = "allow sign-in"
    accept_server_tools = "accept server tools"
    # `aat serve`'s /metrics (SPEC §23): an admin's, or a scraper's with AAT_METRICS_TOKEN.
    read_metrics = "read metrics"


# The deciding permissions: a viewer holds none of them.
DECIDING = frozenset({Permission.run, Permission.approve, Permission.deny, Permission.edit})

# What each role grants. Admins hold every permission; approvers decide, run and let agents
# sign in; viewers see every call and decide none.
GRANTS: Mapping[str, frozenset[Permission]] = {
    "admin": frozenset(Permission),
    "approver": frozenset({Permission.view, *DECIDING, Permission.allow_sign_in}),
    "viewer": frozenset({Permission.view}),
}

# The roles whose operators may approve (the store's query for who could approve a job).
APPROVING_ROLES = frozenset(r for r, granted in GRANTS.items() if Permission.approve in granted)

# The roles that may change who may decide: one operator must keep such a role.
MANAGING_ROLES = frozenset(
    r for r, granted in GRANTS.items() if Permission.manage_operators in granted
)


# The table as the store's operator rows need it (the store sits below trust and is handed
# it): the roles a row may hold, the first operator an admin (who may add the rest), a later
# one an approver unless named otherwise, and always one operator who manages the others.
ROLE_BOOK = RoleBook(
    roles=tuple(GRANTS),
    first="admin",
    later="approver",
    keep=MANAGING_ROLES,
)


@dataclass(frozen=True)
class Decider:
    """Who asks. `listed` is False for the platform's own callers and tests (a name with no
    operator row): they decide as an approver would. `forged` says why a listed operator's
    row grants nothing (its signature does not verify). `role` None with `listed`: an
    operator removed, or whose row does not verify: nothing is granted."""

    name: str
    role: str | None
    listed: bool = True
    forged: str | None = None


class Target(Protocol):
    """Something with a standing of its own that answers the rest of the question (a job's
    standing answers approve, deny and edit through `webplatform.trust.decidability`)."""

    def permits(self, actor: Decider, permission: Permission) -> bool:
        """True when `actor`, whose role grants `permission`, may use it on this target."""
        ...


def granted(actor: Decider) -> frozenset[Permission]:
    """The permissions `actor`'s role grants (none for a forged or removed operator)."""
    if actor.forged is not None:
        return frozenset()
    if not actor.listed:
        return GRANTS["approver"]
    return GRANTS.get(actor.role or "", frozenset())


def may(actor: Decider, permission: Permission, target: Target | None = None) -> bool:
    """True when `actor` may do `permission` (to `target`, when it has its own standing)."""
    if permission not in granted(actor):
        return False
    return target is None or target.permits(actor, permission)


def can(actor: Decider) -> dict[str, bool]:
    """Every permission's answer for `actor`, by name (`can.approve`, `can.make_rules`):
    what a page is handed so that it shows only what the server will allow."""
    have = granted(actor)
    return {p.name: p in have for p in Permission}


def refusal(actor: Decider, permission: Permission) -> str:
    """The one line that says why `actor` may not do `permission` (their role grants it not)."""
    if actor.forged is not None:
        return actor.forged
    if permission in DECIDING:
        return (
            f"{actor.name} is a {actor.role or 'removed operator'}: viewers see every call "
            "and decide or run none"
        )
    if permission is Permission.allow_sign_in:
        return (
            f"{actor.name} is a {actor.role or 'removed operator'}: only approvers and admins "
            "may let an agent sign in; ask one of them"
        )
    what = "manage agent tokens" if permission is Permission.mint_tokens else permission.value
    return f"only an admin may {what}; {actor.name} is not one"


def roles_holding(permission: Permission) -> list[str]:
    """The roles whose operators hold `permission`, in the order `GRANTS` lists them: what a
    refusal page names as the way to it."""
    return [role for role, have in GRANTS.items() if permission in have]
