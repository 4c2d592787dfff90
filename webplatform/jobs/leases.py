"""Worker claims and leases: take an approved job, keep its lease, finish it, reap the lost.

A running job is owned by one worker through its lease; a worker that stops renewing it loses
the job to `reap_lost`, and its late result is refused by `finish`'s compare-and-set. The
claim's, the lease's and the reaping's SQL is the store's (`webplatform.store.leases`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from webplatform.store.clock import shared_now
from webplatform.store.leases import approved_waiting, claim_next, reap_lost, renew_lease
from webplatform.store.models import Job, JobState
from webplatform.store.transitions import IllegalMove, Move, StaleState, Step, compare_and_set

__all__ = [
    "FINISH_STATES",
    "Ending",
    "approved_waiting",
    "claim_next",
    "finish",
    "reap_lost",
    "renew_lease",
]

S = JobState
# `lost` too: an upstream MCP server's connection broke after its call was sent (SPEC §22).
FINISH_STATES = frozenset({S.succeeded, S.failed, S.timed_out, S.lost})


@dataclass(frozen=True)
class Ending:
    """How a run ended, as `finish` records it: `succeeded`, `failed` or `timed_out`, with
    what the run left (its exit code, parsed result as JSON, output and error line) and its
    `note` (why the caller's folder was not offered to the tool) when there is one."""

    state: JobState
    exit_code: int | None = None
    result_json: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    error: str | None = None
    note: str | None = None


def finish(*, session: Session, job_id: int, worker_id: str, ending: Ending) -> Job:
    """Record how a run ended (`ending`).

    Only while the job is still `running` on `worker_id`; otherwise StaleState (it was
    cancelled or reaped as lost, and that verdict stands).
    """
    state, exit_code = ending.state, ending.exit_code
    if state not in FINISH_STATES:
        raise IllegalMove(f"a run cannot finish as {state.value}")
    fields = {
        "finished_at": shared_now(session),
        "lease_expires_at": None,
        "exit_code": exit_code,
        "result_json": ending.result_json,
        "stdout": ending.stdout,
        "stderr": ending.stderr,
        "error": ending.error,
        "note": ending.note,
    }
    try:
        return compare_and_set(
            session,
            Move(
                job_id,
                Step(S.running, state, worker_id, detail=f"exit code {exit_code}"),
                fields,
                owner=worker_id,
            ),
        )
    except StaleState as exc:
        if exc.actual == S.running:
            raise StaleState(
                job_id=job_id,
                expected=S.running,
                actual=S.running,
                decided_by=exc.decided_by,
                message=f"job {job_id} is running on another worker",
            ) from None
        raise
