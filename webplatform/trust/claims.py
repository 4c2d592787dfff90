"""What a job's row claims about its approval, and whether its signature bears the claim out.

A row in `approved` (or any state an approved job moves on to) names its approvers in
`decided_by`; a SQL `UPDATE` can write that too. A worker fails such a job when it looks
(`webplatform.worker`), but until then every page and answer reads the row: so nothing may
show "approved by NAME" unless the decision's signature verifies (SPEC §20). A row whose
claim does not verify reads `UNSIGNED_APPROVAL` instead, on every surface.

Checks are cheap when repeated: `RowSeal.holds` remembers each (message, signature) pair that
verified, so a page listing fifty jobs checks each one once per process, and again only when
its row changes.
"""

from __future__ import annotations

from webplatform.store.models import Job, JobState
from webplatform.store.seals import RowSeal
from webplatform.store.transitions import UNSIGNED_APPROVAL
from webplatform.trust import signing

__all__ = ["APPROVED_STATES", "UNSIGNED_APPROVAL", "approvers", "claims_approval", "unsigned"]

S = JobState
# The states of a job that was approved (by an operator, or by a rule on an operator's
# behalf): `decided_by` then names who approved it. A withdrawn, denied or expired job's
# `decided_by` names who ended it, which is no approval.
APPROVED_STATES = frozenset({S.approved, S.running, S.succeeded, S.failed, S.timed_out, S.lost})


def claims_approval(job: Job) -> bool:
    """True when the row says an operator approved it (see `APPROVED_STATES`)."""
    return bool(job.decided_by) and job.state in APPROVED_STATES


def unsigned(job: Job, seal: RowSeal) -> bool:
    """True when the row claims an approval that no valid signature of a trusted decision key
    covers (the job id, digest, tool, action, approvers and time as the row has them)."""
    if not claims_approval(job):
        return False
    decision = signing.decision_of(job, "approved")
    return decision is None or not seal.holds(decision.message(), job.decision_signature)


def approvers(job: Job, seal: RowSeal) -> str | None:
    """Who approved `job`, as a page may show them: its `decided_by` when the row claims an
    approval that verifies, else None (no approval, or `unsigned`)."""
    if not claims_approval(job) or unsigned(job, seal):
        return None
    return job.decided_by
