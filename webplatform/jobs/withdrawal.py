"""An agent withdraws a call of its own that still waits for an operator.

Withdrawing is a denial through the ordinary decision path (`jobs.deny`: compare-and-set,
audited), with the reason `withdrawn by the agent`: the card leaves the queue and the call
never runs. Only a pending job can be withdrawn; one already approved, running or finished
keeps its course. Denying cannot make anything run, so this needs no operator and no
signature; approving stays the dashboard's alone.
"""

from __future__ import annotations

import logging

from webplatform.jobs import states as jobs
from webplatform.platform import Actor, Platform
from webplatform.store.models import Job, JobState

logger = logging.getLogger(__name__)

WITHDRAWN = "withdrawn by the agent"
# A person chose Decline in the agent's client when it asked them to open the job page.
DECLINED_IN_CLIENT = "declined in the agent's client"
# How many edits landing during one withdrawal are followed (each makes a new job).
_EDITS_FOLLOWED = 5


def withdrawer(actor: Actor) -> str:
    """Who the job's decision names: the agent (never an operator's name, so no operator's
    role or self-approval rule applies to it)."""
    return f"agent {actor.name}"


def withdraw(
    *, platform: Platform, job_id: int, actor: Actor, reason: str = WITHDRAWN
) -> JobState | None:
    """Deny `job_id` as withdrawn by `actor` (with `reason`) if it still waits for an operator.

    A request an operator edited (edit, then approve) stands for the job it was edited into:
    that one is withdrawn. Returns the job's state afterwards (`denied` when withdrawn now;
    its own state when it was decided first), or None when there is no such job.
    """
    for _ in range(_EDITS_FOLLOWED):
        current = platform.jobs.current(job_id)
        if current is None or current.id is None:
            return None
        target = current.id
        try:
            job = _deny(platform, target, actor, reason)
        except jobs.JobNotFound:
            return None
        except jobs.StaleState as exc:
            now = platform.jobs.current(job_id)
            if now is not None and now.id != target:
                continue  # an operator's edit landed meanwhile: withdraw the job it made
            logger.info("job %s was decided before %s withdrew it", target, actor.name)
            return exc.actual
        return JobState(job.state)
    return None


def _deny(platform: Platform, job_id: int, actor: Actor, reason: str) -> Job:
    return platform.jobs.step(
        jobs.deny,
        job_id=job_id,
        operator=withdrawer(actor),
        reason=reason,
        context=jobs.Context(address=actor.address),
    )
