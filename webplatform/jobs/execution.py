"""Running one job that is already `running`: the subprocess, its lease, its recorded outcome.

Shared by the worker (approved irreversible jobs it claimed) and `services` (reversible jobs
the requester runs at once), so both keep a lease the same way and record results the same
way. A job whose lease is lost (cancelled, or reaped as `lost`) stops its subprocess and
never records a result over that verdict.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from webplatform.canonical import canonical_json
from webplatform.config import Settings
from webplatform.jobs import leases
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.process import confine, runner
from webplatform.process.outcome import RunResult
from webplatform.redaction import Redactor
from webplatform.registry.model import ActionSpec, ToolSpec
from webplatform.store.models import Job, JobState

log = logging.getLogger(__name__)

STATE_OF_OUTCOME: dict[str, JobState] = {
    "succeeded": JobState.succeeded,
    "failed": JobState.failed,
    "usage_error": JobState.failed,
    "timed_out": JobState.timed_out,
}

RunFn = Callable[..., RunResult]


class LeaseLost(Exception):
    """Raised from the runner's tick when the job stopped being this process's to run."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} is no longer running here")
        self.job_id = job_id


def execute(
    *,
    platform: Platform,
    settings: Settings,
    worker_id: str,
    job_id: int | None = None,
    record: Callable[[], int] | None = None,
    tool: ToolSpec,
    action: ActionSpec,
    args: dict[str, Any],
    secrets: Mapping[str, str],
    run: RunFn = runner.run,
    caller_cwd: Path | None = None,
    secret_args: Sequence[str] = (),
) -> Job | None:
    """Run a `running` job owned by `worker_id`, record how it ended and return the job as
    recorded (None when that verdict was not this run's to record).

    The job is `job_id`, or the one `record()` writes (as `running`, owned by `worker_id`)
    and whose id it returns: that is called once the tool's process is being prepared and
    before it runs anything, so the write and the spawn overlap; and, for a tool that could
    not be started at all, before its failure is recorded. Either way the row comes first.

    Never raises for the tool's misbehaviour; a lost lease ends the run silently. Secret
    values (the tool's secrets and `secret_args`) are masked in everything recorded, even
    when the tool itself prints them.
    """
    if (job_id is None) == (record is None):
        raise TypeError("execute needs exactly one of job_id and record")
    job = _Row(job_id, record)
    mask = Redactor([*secrets.values(), *secret_args])
    extra: dict[str, Any] = {} if caller_cwd is None else {"caller_cwd": caller_cwd}
    if record is not None:
        extra["admit"] = job.write
    try:
        outcome = run(
            tool,
            action,
            args,
            home=settings.home,
            secrets=secrets,
            on_tick=lambda: job.renew(platform, worker_id, settings.worker_lease_s),
            tick_s=max(0.05, min(1.0, settings.worker_lease_s / 4)),
            fence=confine.Fence.from_settings(settings),
            redact=mask,
            **extra,
        )
    except LeaseLost:
        log.warning("job %d: stopped, it was cancelled or reaped while running", job.id)
        return None
    except _NotWritten as failed:
        raise failed.cause from None  # no row: nothing ran, nothing to record
    except Exception as exc:
        # Only the exception's type: its text could quote an argument or a secret.
        log.error("job %d: the runner raised %s", job.write(), type(exc).__name__)
        return finish_job(
            platform=platform,
            job_id=job.write(),
            worker_id=worker_id,
            state=JobState.failed,
            error=f"the runner failed: {type(exc).__name__}",
        )
    return finish_job(
        platform=platform,
        job_id=job.write(),
        worker_id=worker_id,
        state=STATE_OF_OUTCOME.get(outcome.outcome, JobState.failed),
        exit_code=outcome.exit_code,
        result_json=None if outcome.result is None else mask(canonical_json(outcome.result)),
        stdout=mask(outcome.stdout),
        stderr=mask(outcome.stderr),
        error=None if outcome.error is None else mask(outcome.error),
        note=outcome.note,
    )


class _NotWritten(Exception):
    """`record` raised: carries its exception past the runner's own handling."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _Row:
    """The job row one `execute` runs: given, or written once (by `record`) when asked for."""

    def __init__(self, job_id: int | None, record: Callable[[], int] | None) -> None:
        self.id = job_id
        self._record = record
        self._renew: Callable[[], None] | None = None

    def write(self) -> int:
        """The job's id, writing its row first if that has not happened yet."""
        if self.id is None:
            assert self._record is not None
            try:
                self.id = self._record()
            except Exception as exc:
                raise _NotWritten(exc) from exc
        return self.id

    def renew(self, platform: Platform, worker_id: str, lease_s: float) -> None:
        """The runner's tick: keep the lease (see `lease_renewer`)."""
        if self._renew is None:
            self._renew = lease_renewer(
                platform=platform, job_id=self.write(), worker_id=worker_id, lease_s=lease_s
            )
        self._renew()


def lease_renewer(
    *, platform: Platform, job_id: int, worker_id: str, lease_s: float
) -> Callable[[], None]:
    """A tick callback that renews the job's lease a few times per lease period.

    Raises `LeaseLost` when the job is no longer ours, which makes the runner kill the
    subprocess's whole process group.
    """
    last = time.monotonic()

    def renew() -> None:
        nonlocal last
        # Renew a few times per lease, not on every tick: each renewal is a write.
        if time.monotonic() - last < lease_s / 3:
            return
        last = time.monotonic()
        try:
            kept = platform.transact(
                lambda s: leases.renew_lease(
                    session=s, job_id=job_id, worker_id=worker_id, lease_s=lease_s
                ),
            )
        except Exception as exc:
            # A database hiccup must not kill the run; if it lasts, the lease runs out.
            log.warning("job %d: lease renewal failed (%s)", job_id, type(exc).__name__)
            return
        if not kept:
            raise LeaseLost(job_id)

    return renew


def finish_job(
    *, platform: Platform, job_id: int, worker_id: str, state: JobState, **fields: Any
) -> Job | None:
    """Record a job's outcome unless it was cancelled or reaped meanwhile (that verdict
    stands); the job as recorded, or None when it was not recorded."""
    try:
        job = platform.transact(
            lambda s: leases.finish(
                session=s, job_id=job_id, worker_id=worker_id, state=state, **fields
            ),
        )
    except jobs.StaleState as exc:
        log.warning("job %d: result dropped: %s", job_id, exc)
        return None
    log.info("job %d: %s", job_id, state.value)
    return job
