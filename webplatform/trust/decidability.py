"""May this operator decide this job now, and what is still needed: the one decision point.

Every decision asks here, and nowhere else: the approve path, edit-then-approve, a denial
(an agent's withdrawal and a `tasks/cancel` too) and the page that shows or hides the
Approve button. The answer is a value, `Verdict`, judged from facts (`Standing`: the job and
who approved it so far; `Decider`: who wants to decide, with which role), so the page and
the refusal cannot disagree. The caller turns a refusal into its error or its line on the
card; `webplatform.jobs.states` also records an expiry before refusing.

The checks, in order (the first that fails is the verdict): the job still waits for a
decision; its approval window is open; the decider's operator row verifies; their role
decides; they did not ask for it when the action forbids self-approval; they did not
approve it already. Rules decided in advance (SPEC §16) plug in as one more check here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlmodel import Session

from webplatform.store.approvals import approvals_of
from webplatform.store.models import Job, JobState
from webplatform.store.operators import DECIDING_ROLES, OperatorError, decider_role
from webplatform.store.seals import RowSeal
from webplatform.store.transitions import ApprovalExpired, stale_error


class Intent(StrEnum):
    """What the decider wants to do to the job."""

    approve = "approve"
    # Change the arguments, then approve the changed call (a new job): the original's
    # approvals so far do not count against it.
    edit = "edit"
    # Refuse it: only the decider's standing (row, role) matters; anyone who may decide
    # may deny, at any time the job still waits.
    deny = "deny"


class Refusal(StrEnum):
    """Why a decider may not decide (the first check that failed)."""

    not_pending = "not_pending"
    expired = "expired"
    forged = "forged"
    viewer = "viewer"
    self_approval = "self_approval"
    already_given = "already_given"


@dataclass(frozen=True)
class Decider:
    """Who wants to decide. `listed` is False for this package's own callers and tests (a
    name with no operator row): they decide as an approver would. `forged` says why a listed
    operator's row decides nothing (its signature does not verify)."""

    name: str
    role: str | None
    listed: bool = True
    forged: str | None = None


@dataclass(frozen=True)
class Standing:
    """Where a job stands: the row (state, window, policy, asker) and who approved it so far."""

    job: Job
    given: tuple[str, ...] = ()

    @property
    def still_needed(self) -> int:
        """How many more approvals the job needs before it may run."""
        return max(0, self.job.approvals_required - len(self.given))


@dataclass(frozen=True)
class Verdict:
    """The answer: may the decider decide now, and if not why (`reason`: the one line an
    error shows; `on_card`: the line the page shows instead of the Approve button)."""

    may_decide: bool
    still_needed: int
    refusal: Refusal | None = None
    reason: str | None = None
    on_card: str | None = None

    @property
    def expired(self) -> bool:
        """The job's approval window closed before this decision."""
        return self.refusal is Refusal.expired


def judge(standing: Standing, decider: Decider, *, intent: Intent, now: datetime) -> Verdict:
    """The verdict on `decider` deciding `standing`'s job at `now` (see the module's checks)."""
    job = standing.job
    needed = standing.still_needed
    if job.state != JobState.pending_approval:
        line = str(stale_error(job, JobState.pending_approval))
        return _refused(needed, Refusal.not_pending, line, "This call no longer waits: reload.")
    if intent is not Intent.deny and job.expires_at is not None and job.expires_at <= now:
        line = str(ApprovalExpired(job.id or 0))
        return _refused(
            needed, Refusal.expired, line, "Its approval window closed: it will not run."
        )
    if decider.forged is not None:
        return _refused(needed, Refusal.forged, decider.forged, decider.forged)
    if decider.listed and decider.role not in DECIDING_ROLES:
        line = (
            f"{decider.name} is a {decider.role}: viewers see every call and decide "
            "none; an admin can change that on their account page"
        )
        return _refused(
            needed, Refusal.viewer, line, "You are a viewer: you see every call and decide none."
        )
    if intent is Intent.deny:
        return Verdict(may_decide=True, still_needed=needed)
    return _approval(standing, decider, intent)


def _approval(standing: Standing, decider: Decider, intent: Intent) -> Verdict:
    """The checks only an approval (or an edit, which is one) must pass."""
    job, needed = standing.job, standing.still_needed
    if not job.self_approval and decider.name == job.asked_by_operator:
        line = (
            f"you asked for job {job.id}, and {job.name} {job.action} may not be approved by "
            "the operator who asked: another operator must approve it"
        )
        card = (
            "You asked for this call, and it may not be approved by the operator who asked: "
            "another operator must approve it."
        )
        return _refused(needed, Refusal.self_approval, line, card)
    if intent is Intent.approve and decider.name in standing.given:
        line = (
            f"you already approved job {job.id}; it needs {needed} more approval(s) from "
            "other operators"
        )
        card = f"You approved this call; it waits for {needed} more approval(s) from others."
        return _refused(needed, Refusal.already_given, line, card)
    return Verdict(may_decide=True, still_needed=needed)


def _refused(needed: int, refusal: Refusal, reason: str, on_card: str) -> Verdict:
    return Verdict(
        may_decide=False, still_needed=needed, refusal=refusal, reason=reason, on_card=on_card
    )


def read_standing(session: Session, job: Job) -> Standing:
    """`job`'s standing as the database has it now: who approved it so far."""
    given = approvals_of(session=session, job_id=job.id or 0)
    return Standing(job=job, given=tuple(a.operator for a in given))


def read_decider(session: Session, name: str, seal: RowSeal | None) -> Decider:
    """Operator `name` as they decide now: their role, from a row that must verify with
    `seal`. No seal, or no row: one of this package's own callers (not `listed`)."""
    if seal is None:
        return Decider(name=name, role=None, listed=False)
    try:
        role = decider_role(session=session, name=name, seal=seal)
    except OperatorError as exc:
        return Decider(name=name, role=None, forged=str(exc))
    return Decider(name=name, role=role, listed=role is not None)
