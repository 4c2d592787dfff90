"""The approval policy of an irreversible action (SPEC §11): how many distinct operators
must approve it, and whether the operator who asked may be one of them.

Pure functions of the settings and the manifest; a job records their answer when it is
asked for, so a later change of either never changes a decision already under way.
"""

from __future__ import annotations

from dataclasses import dataclass

from webplatform.config import Settings
from webplatform.registry.model import ActionSpec
from webplatform.store.models import Job

REASON_MAX_CHARS = 500


@dataclass(frozen=True)
class Policy:
    """What an irreversible call needs before it runs."""

    approvals: int
    self_approval: bool

    @classmethod
    def recorded(cls, job: Job) -> Policy:
        """The policy `job` was recorded with (what it keeps, whatever the settings say now)."""
        return cls(job.approvals_required, job.self_approval)


# Why no rule stands in for the operators an action needs, for every place that asks.
PEOPLE_NEEDED = "needs more than one operator, or one other than the asker"


def people_needed(policy: Policy) -> str | None:
    """Why no rule may stand in for the operators `policy` needs (several approvals, or an
    operator other than the asker: SPEC §16), or None when an allow rule may. The one answer
    the Rules page, Approve and allow similar, and a call's ruling all ask."""
    return PEOPLE_NEEDED if policy.approvals > 1 or not policy.self_approval else None


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
