"""The effect approved is the effect run (SPEC §20): a call's preview, run again before the run.

An approval of a call whose action has a preview is signed over the digest of the preview the
operator saw (`Job.preview_digest`). What the preview shows can change after it ran (another
call rewrites the file it reads), so the worker that claimed the job runs the preview again,
as the card's was run (confined, no writes, `AAT_PREVIEW_TIMEOUT_S`), right before the tool
starts. When it says the same, the call runs. When it says something else, or fails, the call
does not run: it goes back to `pending_approval` with the new preview on its card, marked
changed, its approvals so far forgotten (a new approval, with its step-up, binds the new
preview), and the audit trail records why (`PREVIEW_CHANGED`). The decision it carried was
never started, so the ledger of started decisions never saw it; a new approval is a new
decision with a new signature.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlmodel import Session

from webplatform.jobs import previews
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.registry.model import Registry
from webplatform.store import previews as preview_rows
from webplatform.store.approvals import forget_approvals
from webplatform.store.models import Job, JobState, utcnow
from webplatform.store.previews import Finished
from webplatform.store.transitions import Move, Step, call_detail, compare_and_set

log = logging.getLogger(__name__)

# The audit event of a call sent back to its approvers because its preview changed.
PREVIEW_CHANGED = "preview-changed"
# What a job sent back forgets: who approved it and when, the signature, its worker and lease.
_FORGOTTEN = (
    "decided_by",
    "decided_at",
    "decided_from",
    "decision_signature",
    "preview_digest",
    "worker_id",
    "started_at",
    "lease_expires_at",
)


@dataclass(frozen=True)
class Recheck:
    """One job a worker holds (`running`, owned by `worker_id`) whose approval binds a
    preview; `lease_s` is how long each lease renewal holds it while the preview runs."""

    job: Job
    worker_id: str
    lease_s: float


def changed_since_approval(
    platform: Platform, recheck: Recheck, load_registry: Callable[[], Registry]
) -> bool:
    """Run the job's preview again; False when it says exactly what was approved (the call
    may start), True when it did not and the job went back to `pending_approval`."""
    job = recheck.job
    done, action = _rerun(platform, recheck, load_registry)
    if done.state == "succeeded" and preview_rows.digest_of(action, done) == job.preview_digest:
        return False
    send_back(platform, recheck, done)
    return True


def _rerun(
    platform: Platform, recheck: Recheck, load_registry: Callable[[], Registry]
) -> tuple[Finished, str]:
    """The preview run again with the job's stored arguments, and its action's name; a
    preview that cannot run at all is a failed one (never an exception)."""
    job = recheck.job
    try:
        spec = load_registry().runnable("agent" if job.kind == "agent" else "tool", job.name)
        action = spec.action(job.action) if spec is not None else None
        preview = previews.preview_action(spec, action) if spec and action else None
        if spec is None or preview is None:
            return Finished("failed", None, "its action no longer names a preview"), "?"
        args = json.loads(job.args_json)
        tick = _renewing(platform, recheck)
        done = previews.run_preview(
            settings=platform.settings, spec=spec, preview=preview, args=args, on_tick=tick
        )
        return done, preview.name
    except Exception as exc:  # the runner's or the registry's failure: the call waits again
        log.error("job %s: the preview could not run again (%s)", job.id, type(exc).__name__)
        return Finished("failed", None, f"the preview could not run: {type(exc).__name__}"), "?"


def _renewing(platform: Platform, recheck: Recheck) -> Callable[[], None]:
    """A runner tick that stops with the process (as a card's preview does) and renews the
    job's lease a few times per lease, so a slow preview does not let the job be reaped."""
    every_s = recheck.lease_s / 3
    due = time.monotonic() + every_s
    job_id = recheck.job.id or 0

    def tick() -> None:
        nonlocal due
        previews.tick()
        if time.monotonic() >= due:
            due = time.monotonic() + every_s
            platform.leases.renew(job_id, recheck.worker_id, recheck.lease_s)

    return tick


def send_back(platform: Platform, recheck: Recheck, done: Finished) -> None:
    """Move the job back to `pending_approval` with `done` as its preview, marked changed;
    its approvals so far no longer count. Dropped (logged) when the job is no longer this
    worker's (cancelled meanwhile)."""
    job, at = recheck.job, utcnow()
    why = _why(done)

    def back(session: Session) -> None:
        compare_and_set(
            session,
            Move(
                job.id or 0,
                Step(
                    JobState.running,
                    JobState.pending_approval,
                    recheck.worker_id,
                    detail=f"{why}; not run: it waits for a new approval ({call_detail(job)})",
                ),
                fields=dict.fromkeys(_FORGOTTEN),
                owner=recheck.worker_id,
                event=PREVIEW_CHANGED,
            ),
        )
        preview_rows.record_changed(session=session, job_id=job.id or 0, done=done, at=at)
        forget_approvals(session=session, job_id=job.id or 0)

    log.warning("job %s not run: %s", job.id, why)
    try:
        platform.leases.step(back)
    except jobs.StaleState as exc:
        log.warning("job %s: not sent back for approval: %s", job.id, exc)


def _why(done: Finished) -> str:
    """One line: how the preview run again differs from the one approved."""
    if done.state != "succeeded":
        error = done.error or done.state
        return f"its preview, run again before the run, failed ({error})"
    return "its preview, run again before the run, says something else than what was approved"
