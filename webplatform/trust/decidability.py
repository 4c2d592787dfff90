"""May this operator decide this job now, and what is still needed: the one decision point.

Every decision asks here, and nowhere else: the approve path, edit-then-approve, a denial
(an agent's withdrawal and a `tasks/cancel` too) and the page that shows or hides the
Approve button. The answer is a value, `Verdict`, judged from facts (`Standing`: the job and
who approved it so far; `Decider`: who wants to decide, with which role), so the page and
the refusal cannot disagree. The caller turns a refusal into its error or its line on the
card; `webplatform.jobs.states` also records an expiry before refusing.

The checks, in order (the first that fails is the verdict): the job still waits for a
decision; its approval window is open; its policy columns are as aat recorded them (an
approval only); the decider's operator row verifies; their role
decides; they did not ask for it when the action forbids self-approval; they did not
approve it already. Rules decided in advance (SPEC §16) plug in as one more check here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from sqlmodel import Session

from webplatform.store.approvals import approvals_of, verified
from webplatform.store.clock import shared_now
from webplatform.store.models import Job, JobApproval, JobState, utcnow
from webplatform.store.operators import OperatorError, decider_role
from webplatform.store.seals import RowSeal, policy_problem
from webplatform.store.transitions import ApprovalExpired, stale_error
from webplatform.trust import claims
from webplatform.trust.permissions import Decider as Decider
from webplatform.trust.permissions import Permission, may

# The audit event of an approved job a worker refused because its policy columns or its
# approvals do not verify (`start_problem`).
POLICY_INVALID = "policy-invalid"


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
    tampered = "tampered"


@dataclass(frozen=True)
class Standing:
    """Where a job stands: the row (state, window, policy, asker), who approved it so far (from
    signed approval rows only), why its policy columns cannot be trusted (None: they are
    as aat recorded them), and whether the row claims an approval whose signature does not
    verify (`unsigned`: a refusal then names no approver). Build it with `standing_of` from
    what the database holds."""

    job: Job
    given: tuple[str, ...] = ()
    tampered: str | None = None
    unsigned: bool = False
    # When it was read, by the clock hosts share (`webplatform.store.clock`); None: judged
    # by this host's clock.
    read_at: datetime | None = None

    @property
    def still_needed(self) -> int:
        """How many more approvals the job needs before it may run."""
        return max(0, self.job.approvals_required - len(self.given))

    def permits(self, actor: Decider, permission: Permission) -> bool:
        """`may`'s answer for this job: approve, deny and edit are judged here, now; any
        other permission the role grants holds on the job as it does anywhere."""
        if permission.value not in Intent.__members__:
            return True
        now = self.read_at or utcnow()
        return judge(self, actor, intent=Intent(permission.value), now=now).may_decide


@dataclass(frozen=True)
class Verdict:
    """The answer: may the decider decide now, and if not why (`reason`: the one line an
    error shows; `on_card`: the line the page shows instead of the Approve button;
    `unsigned`: a job no longer pending claims an approval no valid signature covers)."""

    may_decide: bool
    still_needed: int
    refusal: Refusal | None = None
    reason: str | None = None
    on_card: str | None = None
    unsigned: bool = False

    @property
    def expired(self) -> bool:
        """The job's approval window closed before this decision."""
        return self.refusal is Refusal.expired


def judge(standing: Standing, decider: Decider, *, intent: Intent, now: datetime) -> Verdict:
    """The verdict on `decider` deciding `standing`'s job at `now` (see the module's checks)."""
    job = standing.job
    needed = standing.still_needed
    if job.state != JobState.pending_approval:
        line = str(stale_error(job, JobState.pending_approval, unsigned=standing.unsigned))
        card = "This call no longer waits: reload."
        verdict = _refused(needed, Refusal.not_pending, line, card)
        return replace(verdict, unsigned=standing.unsigned)
    if intent is not Intent.deny and job.expires_at is not None and job.expires_at <= now:
        line = str(ApprovalExpired(job.id or 0))
        return _refused(
            needed, Refusal.expired, line, "Its approval window closed: it will not run."
        )
    if intent is not Intent.deny and standing.tampered is not None:
        card = "This call's approval policy was changed outside aat: it cannot be approved."
        return _refused(needed, Refusal.tampered, standing.tampered, card)
    if decider.forged is not None:
        return _refused(needed, Refusal.forged, decider.forged, decider.forged)
    if not may(decider, Permission(intent.value)):
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


# The states in which a job's policy still decides something: it waits for an approval, or
# for a worker to start it on one. Every job that reaches them was recorded with its policy
# signed; a job run at once (the run form's reversible run, `run_tool`) never carries one,
# and a finished job's policy decides nothing more.
POLICY_STATES = frozenset({JobState.pending_approval, JobState.approved})


def standing_of(job: Job, rows: list[JobApproval], seal: RowSeal | None) -> Standing:
    """`job`'s standing from its approval `rows`: only rows that verify with `seal` count, and
    the job's policy columns must verify too while it waits (`POLICY_STATES`; checked, and an
    unsigned policy audited, only then: a job that never waited has none to check). Without a
    seal nothing can be checked: no approval counts and the job may not be approved (a
    denial needs neither)."""
    if seal is None:
        return Standing(job=job, tampered=f"job {job.id}: no key here to check its policy")
    given = verified(rows, seal=seal, job_id=job.id or 0, digest=job.args_digest)
    tampered = policy_problem(seal, job) if job.state in POLICY_STATES else None
    return Standing(
        job=job, given=tuple(given), tampered=tampered, unsigned=claims.unsigned(job, seal)
    )


def read_standing(session: Session, job: Job, seal: RowSeal | None) -> Standing:
    """`job`'s standing as the database has it now (see `standing_of`), read at the time
    hosts share."""
    standing = standing_of(job, approvals_of(session=session, job_id=job.id or 0), seal)
    return replace(standing, read_at=shared_now(session))


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


def start_problem(
    job: Job, operators: tuple[str, ...], rows: list[JobApproval], seal: RowSeal
) -> str | None:
    """Why an approved `job` may not start under its own policy, or None: the worker asks this
    after the decision's signature (naming `operators`) verified. The policy columns must
    verify with `seal`, the decision must name as many distinct operators as the policy needs
    (and not the asker when self-approval is off), and with several approvals each operator
    named must have a signed approval row among `rows`: a decision signed over an approval
    row inserted by SQL (by a dashboard from before approvals were signed) starts nothing."""
    if (tampered := policy_problem(seal, job)) is not None:
        return tampered
    named = set(operators)
    if len(named) < job.approvals_required:
        return (
            f"job {job.id} needs {job.approvals_required} approvals from different operators "
            f"and its decision names {len(named)}"
        )
    if not job.self_approval and job.asked_by_operator in named:
        return f"job {job.id} was approved by {job.asked_by_operator}, who asked for it"
    if job.approvals_required > 1:
        given = set(verified(rows, seal=seal, job_id=job.id or 0, digest=job.args_digest))
        if missing := sorted(named - given):
            return (
                f"job {job.id} has no signed approval by {', '.join(missing)} (an approval "
                "row added or changed outside aat)"
            )
    return None
