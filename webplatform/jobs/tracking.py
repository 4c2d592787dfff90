"""Following a job once it is requested: the caller's answer for it, waiting for it, what waits.

The MCP bridge, the dashboard and `aat run` read a job's outcome only through here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from sqlmodel import Session

from webplatform.config import Settings
from webplatform.jobs import states as jobs
from webplatform.jobs.answers import Answer, Status
from webplatform.platform import Actor, Platform
from webplatform.store import queries
from webplatform.store.approvals import approvals_of, verified
from webplatform.store.models import UNFINISHED_STATES, Job, JobState, Surface
from webplatform.store.rules import rule_row
from webplatform.trust import claims

STDERR_TAIL_CHARS = 2000
# The MCP bridge and `aat run` re-read a waiting job this often; approvals land within it.
WAIT_POLL_S = 0.1


def answer_for(
    job: Job,
    *,
    settings: Settings,
    warning: str | None = None,
    approvals_given: int = 0,
    unsigned: bool = False,
) -> Answer:
    """The caller's view of a job in its current state (`approvals_given`: how many
    operators approved a pending job so far; `unsigned`: its row claims an approval whose
    signature does not verify, so no approver is named and the answer says so)."""
    state = JobState(job.state)
    base = Answer(Status(state.value), job=job.id, tool=job.name, action=job.action)
    base.note = job.note
    if unsigned:
        base.warning = (
            f"job {job.id} was {claims.UNSIGNED_APPROVAL}: no operator approved it, and it "
            "will not run (a worker fails it when it looks)"
        )
    by = None if unsigned else job.decided_by
    if job.allowed_by_rule is not None:
        base.allowed_by = {"rule": job.allowed_by_rule, "by": by}
    if job.edited_from is not None:
        base.edited_from = job.edited_from
        base.args = json.loads(job.args_json)
    if state is JobState.succeeded:
        base.result = json.loads(job.result_json) if job.result_json else None
    elif state in (JobState.failed, JobState.timed_out, JobState.lost, JobState.cancelled):
        base.error = job.error or f"job ended {state.value}"
        base.exit_code = job.exit_code
        if job.stderr:
            base.stderr_tail = job.stderr[-STDERR_TAIL_CHARS:]
    elif state is JobState.denied:
        base.reason = job.reason or "no reason given"
        base.decided_by = job.decided_by
    elif state is JobState.expired:
        base.error = "nobody approved this call in time; it did not run. Ask again if still needed."
    elif state is JobState.pending_approval:
        assert job.id is not None
        base.approval_url = settings.job_page_url(job.id)
        base.expires_at = job.expires_at.isoformat() if job.expires_at else None
        needed = max(1, job.approvals_required - approvals_given)
        base.approvals_needed = needed
        who = (
            "an operator must approve"
            if job.approvals_required == 1
            else f"{needed} more operator(s) must approve ({approvals_given} of "
            f"{job.approvals_required} approvals so far)"
        )
        base.next = (
            f"{who} this call in the dashboard; call job_status with "
            f"job={job.id} (and wait_s) to get the outcome"
        )
        base.warning = warning
    elif state in (JobState.approved, JobState.running):
        base.decided_by = by
        base.next = f"call job_status with job={job.id} to get the result"
    return base


NOBODY_TO_APPROVE = (
    "no dashboard is running: start it with `aat serve`, or nobody can approve this call"
)


def _dashboard_alive(session: Session, settings: Settings) -> bool:
    within = max(3 * settings.heartbeat_s, 10.0)
    return jobs.fresh_heartbeat(session=session, role="dashboard", within_s=within)


def no_such_job(job_id: int) -> Answer:
    """The answer for a job id that names no job of the asker's (or none at all)."""
    return Answer(Status.invalid, error=f"no job {job_id}; job ids come from run results")


def job_answer(*, platform: Platform, job_id: int, requester: Actor | None = None) -> Answer:
    """The current answer for a job id, or `invalid` when there is no such job. A job an
    operator edited answers with the edited job's outcome (`edited_from`, `args`).

    With `requester`, another requester's job is answered exactly as a missing one: results
    belong to whoever asked (its agent token; without one, its client on its surface).
    """

    seal = platform.seal()  # outside the read: its first use may adopt rows (a write)

    def read(session: Session) -> Answer:
        if requester is not None and not _asked_by(session, job_id, requester):
            return no_such_job(job_id)
        job = queries.current_job(session=session, job_id=job_id)
        if job is None:
            return no_such_job(job_id)
        assert job.id is not None
        warning = None
        if job.state == JobState.pending_approval.value and not _dashboard_alive(
            session, platform.settings
        ):
            warning = NOBODY_TO_APPROVE
        given = 0
        if job.state == JobState.pending_approval.value:
            # Only signed approvals count: a row inserted by SQL is no operator's approval.
            rows = approvals_of(session=session, job_id=job.id)
            given = len(verified(rows, seal=seal, job_id=job.id, digest=job.args_digest))
        answer = answer_for(
            job,
            settings=platform.settings,
            warning=warning,
            approvals_given=given,
            unsigned=claims.unsigned(job, seal),
        )
        rule_id = job.allowed_by_rule
        if answer.allowed_by is not None and (rule := rule_row(session=session, rule_id=rule_id)):
            expires = rule.expires_at.isoformat() if rule.expires_at else None
            answer.allowed_by = {**answer.allowed_by, "expires_at": expires}
        return answer

    return platform.jobs.step(read, write=False)


def asked_by(*, platform: Platform, job_id: int, requester: Actor) -> bool:
    """True when job `job_id` exists and `requester` asked for it."""
    job = platform.jobs.get(job_id)
    return job is not None and queries.job_of_requester(
        job, surface=requester.surface, client=requester.client, agent=requester.agent
    )


def _asked_by(session: Session, job_id: int, requester: Actor) -> bool:
    job = jobs.get_job(session=session, job_id=job_id)
    return job is not None and queries.job_of_requester(
        job, surface=requester.surface, client=requester.client, agent=requester.agent
    )


def recent_of_requester(
    *, platform: Platform, requester: Actor, limit: int = 10
) -> list[dict[str, Any]]:
    """`requester`'s newest jobs, newest first: id, tool, action, state and when asked (so
    an agent whose client gave up on a call can find the job again)."""
    found = platform.jobs.recent_from(requester.surface, requester.client, requester.agent, limit)
    return [
        {
            "job": job.id,
            "tool": job.name,
            "action": job.action,
            "state": JobState(job.state).value,
            "created_at": job.created_at.isoformat(timespec="seconds"),
        }
        for job in found
    ]


def job_state(*, platform: Platform, job_id: int) -> JobState | None:
    """Just the state of a job, or of the job it was edited into (cheap; used by waiting
    loops, so a wait on an edited job goes on until the edited one is decided)."""
    job = platform.jobs.current(job_id)
    return None if job is None else JobState(job.state)


def wait_for_job(
    *,
    platform: Platform,
    job_id: int,
    timeout_s: float,
    on_wait: Callable[[float], None] | None = None,
    poll_s: float = WAIT_POLL_S,
) -> Answer:
    """Wait up to `timeout_s` for a job to finish or be decided; return its answer then.

    `on_wait(elapsed_s)` is called on every poll (progress notifications, lease renewals).
    Stopping the wait never stops the job.
    """
    start = time.monotonic()
    while True:
        state = job_state(platform=platform, job_id=job_id)
        if state is None or state not in UNFINISHED_STATES:
            break
        elapsed = time.monotonic() - start
        if elapsed >= timeout_s:
            break
        if on_wait is not None:
            on_wait(elapsed)
        time.sleep(min(poll_s, max(0.0, timeout_s - elapsed)))
    return job_answer(platform=platform, job_id=job_id)


def pending_for(
    *, platform: Platform, surface: Surface | None = None, client: str | None = None
) -> list[dict[str, Any]]:
    """Jobs waiting for an operator that came in through `surface` from `client`, oldest first.

    `None` matches any surface or client. Reading changes nothing.
    """
    waiting = platform.jobs.pending_approvals(500)
    return [
        _pending_entry(platform, job)
        for job in waiting
        if (surface is None or Surface(job.surface) is surface)
        and (client is None or job.client == client)
    ]


def pending_of_client(
    *, platform: Platform, surface: Surface, client: str | None, agent: str | None = None
) -> list[dict[str, Any]]:
    """The jobs one requester has waiting for an operator, oldest first, on this surface: an
    agent token's jobs when the request carried one, else exactly this client name's jobs
    asked without a token (a client that gave no name sees only nameless clients' jobs).

    The MCP bridge's level-triggered approvals resource is built on this; reading changes
    nothing.
    """
    waiting = platform.jobs.pending_from(surface, client, agent)
    return [_pending_entry(platform, job) for job in waiting]


def _pending_entry(platform: Platform, job: Job) -> dict[str, Any]:
    return {
        "job": job.id,
        "kind": job.kind,
        "tool": job.name,
        "action": job.action,
        "args": json.loads(job.args_json),
        "requested_at": job.created_at.isoformat(),
        "expires_at": job.expires_at.isoformat() if job.expires_at else None,
        "approval_url": platform.settings.job_page_url(job.id or 0),
    }
