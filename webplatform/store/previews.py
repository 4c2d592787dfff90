"""Preview rows (SPEC §16): written `pending` with their job, finished once, read by pages.

Each row keeps the digest of what a card shows of it (`preview_digest`), which an approval
binds (SPEC §20); a worker that runs the preview again before the run and gets another
answer records the new one here (`record_changed`), marked changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, or_, update
from sqlalchemy.orm import defer
from sqlmodel import Session, col, delete, func, select

from webplatform.canonical import canonical_json, sha256_hex
from webplatform.store.clock import shared_now
from webplatform.store.models import Job, JobPreview, JobState, utcnow

PENDING = "pending"


@dataclass(frozen=True)
class PreviewHead:
    """A preview as a card shows it: the row without its output, the output's head, and how
    long the whole output is (in characters)."""

    row: JobPreview
    head: str | None
    size: int


@dataclass(frozen=True)
class Finished:
    """How a preview ended, as its row records it."""

    state: str  # succeeded | failed | timed_out
    output: str | None
    error: str | None
    truncated: bool = False


def preview_digest(
    *, action: str, state: str, output: str | None, error: str | None, truncated: bool
) -> str:
    """sha256 over everything a card or job page shows of a preview: its action, how it
    ended, its output and error. Equal previews, equal digests; a pending one has its own."""
    shown = {
        "action": action,
        "state": state,
        "output": output,
        "error": error,
        "truncated": truncated,
    }
    return sha256_hex(canonical_json(shown))


def digest_of(action: str, done: Finished) -> str:
    """The digest of preview `action` ended as `done` (see `preview_digest`)."""
    return preview_digest(
        action=action,
        state=done.state,
        output=done.output,
        error=done.error,
        truncated=done.truncated,
    )


def add_pending(*, session: Session, job_id: int, action: str) -> None:
    """Record that job `job_id`'s preview `action` is about to run."""
    pending = preview_digest(action=action, state=PENDING, output=None, error=None, truncated=False)
    started = shared_now(session)  # an orphan is told by this time, on any host
    session.add(
        JobPreview(job_id=job_id, action=action, state=PENDING, digest=pending, created_at=started)
    )
    session.flush()


def finish(*, session: Session, job_id: int, done: Finished, at: datetime | None = None) -> bool:
    """Record how the preview ended, once: False when it was no longer pending (or is gone)."""
    row = session.get(JobPreview, job_id)
    if row is None:
        return False
    stmt = (
        update(JobPreview)
        .where(col(JobPreview.job_id) == job_id, col(JobPreview.state) == PENDING)
        .values(**_ended(row.action, done, at or utcnow()))
    )
    return bool(session.execute(stmt).rowcount)  # type: ignore[attr-defined]


def claim_orphans(*, session: Session, stopped_error: str, stale_before: datetime) -> list[int]:
    """The jobs still waiting for a decision whose preview's process is gone, each claimed
    (set `pending` again, from now) once across every process: ids to run their previews for.

    Gone: the preview ended `stopped_error` (its process exited while it ran), or is still
    `pending` since before `stale_before` (its process was killed, or the row never heard of
    its end). Each claim repeats the test it passed, so two processes never both claim a row.
    """
    orphaned = or_(
        and_(col(JobPreview.state) == "failed", col(JobPreview.error) == stopped_error),
        and_(col(JobPreview.state) == PENDING, col(JobPreview.created_at) < stale_before),
    )
    waiting = select(Job.id).where(col(Job.state) == JobState.pending_approval)
    found = session.exec(
        select(JobPreview.job_id, JobPreview.action)
        .where(orphaned, col(JobPreview.job_id).in_(waiting))
        .order_by(col(JobPreview.job_id))
    ).all()
    now = shared_now(session)
    claimed = []
    for job_id, action in found:
        pending = preview_digest(
            action=action, state=PENDING, output=None, error=None, truncated=False
        )
        again = {"state": PENDING, "output": None, "error": None, "truncated": False}
        stmt = (
            update(JobPreview)
            .where(col(JobPreview.job_id) == job_id, orphaned)
            .values(**again, created_at=now, finished_at=None, digest=pending)
        )
        if session.execute(stmt).rowcount:  # type: ignore[attr-defined]
            claimed.append(job_id)
    return claimed


def record_changed(*, session: Session, job_id: int, done: Finished, at: datetime) -> None:
    """Replace job `job_id`'s preview with `done`, what a run before the call's own run said,
    marked changed at `at` (SPEC §20): the card shows it, and a new approval binds it."""
    row = session.get(JobPreview, job_id)
    if row is None:
        return
    values = _ended(row.action, done, at) | {"changed_at": at}
    session.execute(update(JobPreview).where(col(JobPreview.job_id) == job_id).values(**values))
    session.expire(row)


def _ended(action: str, done: Finished, at: datetime) -> dict[str, object]:
    """The columns of a preview that ended as `done` at `at`."""
    return {
        "state": done.state,
        "output": done.output,
        "error": done.error,
        "truncated": done.truncated,
        "finished_at": at,
        "digest": digest_of(action, done),
    }


def preview_of(*, session: Session, job_id: int) -> JobPreview | None:
    """Job `job_id`'s preview, whole, or None when its action has none."""
    return session.get(JobPreview, job_id)


def preview_heads(
    *, session: Session, job_ids: Iterable[int], head_chars: int
) -> dict[int, PreviewHead]:
    """The previews of `job_ids` with at most `head_chars` of each output, by job id.

    The database cuts the output, so a page of cards never reads whole large previews.
    """
    ids = list(job_ids)
    if not ids:
        return {}
    stmt = (
        select(
            JobPreview,
            func.substr(JobPreview.output, 1, head_chars),
            func.coalesce(func.length(JobPreview.output), 0),
        )
        .options(defer(JobPreview.output))  # type: ignore[arg-type]
        .where(col(JobPreview.job_id).in_(ids))
    )
    return {
        row.job_id: PreviewHead(row=row, head=head, size=int(size))
        for row, head, size in session.exec(stmt).all()
    }


def forget(*, session: Session, job_ids: Iterable[int]) -> None:
    """Delete the previews of jobs that retention deletes."""
    ids = list(job_ids)
    if ids:
        session.execute(delete(JobPreview).where(col(JobPreview.job_id).in_(ids)))
