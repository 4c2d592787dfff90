"""The approval policy of an irreversible action (SPEC §11): how many distinct operators
must approve it, and whether the operator who asked may be one of them.

Pure functions of the settings and the manifest; a job records their answer when it is
asked for, so a later change of either never changes a decision already under way.
"""

from __future__ import annotations

from dataclasses import dataclass

from webplatform.config import Settings
from webplatform.registry.model import ActionSpec

REASON_MAX_CHARS = 500


@dataclass(frozen=True)
class Policy:
    """What an irreversible call needs before it runs."""

    approvals: int
    self_approval: bool

    @property
    def always_asks(self) -> bool:
        """True when no rule may stand in for the operators: several approvals are needed,
        or an operator other than the asker (SPEC §16)."""
        return self.approvals > 1 or not self.self_approval


def policy_for(settings: Settings, action: ActionSpec) -> Policy:
    """`approvals:` of the action, raised to `AAT_APPROVALS_REQUIRED`; self-approval unless
    the action says `self_approval: false` or `AAT_SELF_APPROVAL=0`."""
    return Policy(
        approvals=max(settings.approvals_required, action.approvals or 1),
        self_approval=settings.self_approval and action.self_approval is not False,
    )


def reason_problem(reason: object) -> str | None:
    """Why the agent's `reason` is unacceptable, in one line, or None when it is fine."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        return f"reason must be text (why you want this call), not {type(reason).__name__}"
    if len(reason) > REASON_MAX_CHARS:
        return (
            f"reason is {len(reason)} characters, over the {REASON_MAX_CHARS}-character "
            "limit: say in a sentence or two why you want this call"
        )
    return None
