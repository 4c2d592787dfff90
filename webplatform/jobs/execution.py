"""Running one job that is already `running`: the subprocess, its lease, its recorded outcome.

Shared by the worker (approved irreversible jobs it claimed) and `services` (reversible jobs
the requester runs at once), so both keep a lease the same way and record results the same
way. A job whose lease is lost (cancelled, or reaped as `lost`) stops its subprocess and
never records a result over that verdict.

A job's row may be written while its tool's process is prepared (`JobRow`): the row write is
the process's go-ahead (`webplatform.process.spawner`), so the two overlap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from webplatform import telemetry
from webplatform.canonical import canonical_json
from webplatform.config import Settings
from webplatform.jobs import leases
from webplatform.jobs import states as jobs
from webplatform.jobs.leases import Ending
from webplatform.platform import Platform
from webplatform.process import confine, runner
from webplatform.process.outcome import RunResult
from webplatform.redaction import Redactor
from webplatform.registry.model import ActionSpec, ToolSpec
from webplatform.store.door import unreachable
from webplatform.store.models import Job, JobState
from webplatform.telemetry import spans

log = logging.getLogger(__name__)

# How long a run's outcome waits for an unreachable database before the worker gives up on
# it (the job is then reaped as `lost`): a server restart or a dropped link is back sooner.
FINISH_RETRY_S = 300.0

STATE_OF_OUTCOME: dict[str, JobState] = {
    "succeeded": JobState.succeeded,
    "failed": JobState.failed,
    "usage_error": JobState.failed,
    "timed_out": JobState.timed_out,
    "lost": JobState.lost,
}

RunFn = Callable[..., RunResult]


class LeaseLost(Exception):
    """Raised from the runner's tick when the job stopped being this process's to run."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} is no longer running here")
        self.job_id = job_id


@dataclass(frozen=True)
class JobCall:
    """What one job runs: an action of a tool with its arguments and the tool's secrets;
    `caller_cwd` as in `runner.ToolCall`, and `secret_args`, the values of its secret
    arguments (masked in everything recorded, with the secrets)."""

    tool: ToolSpec
    action: ActionSpec
    args: dict[str, Any]
    secrets: Mapping[str, str]
    caller_cwd: Path | None = None
    secret_args: Sequence[str] = ()


# What a preview may print: it is shown on a card, never run for its effect.
PREVIEW_MAX_BYTES = 64 * 1024


def process_call(
    settings: Settings, call: JobCall, mask: Redactor, *, preview: bool = False
) -> runner.ToolCall:
    """The one place a call becomes a process call: the tool's action with its arguments and
    secrets, confined as the settings say, its output masked by `mask`. A `preview` runs
    with no writes, for at most `AAT_PREVIEW_TIMEOUT_S`, and prints at most
    `PREVIEW_MAX_BYTES`."""
    fence = confine.Fence.from_settings(settings)
    action, limits = call.action, {}
    if preview:
        action = replace(action, timeout_s=settings.preview_timeout_s)
        fence = replace(fence, no_writes=True)
        limits = {"max_output_bytes": PREVIEW_MAX_BYTES}
    return runner.ToolCall(
        call.tool,
        action,
        call.args,
        home=settings.home,
        secrets=call.secrets,
        caller_cwd=call.caller_cwd,
        fence=fence,
        redact=mask,
        **limits,
    )


class JobRow:
    """The row of the job one `execute` runs: already written (`JobRow.written(job_id)`),
    or written by `record()` (as `running`, owned by the executor's worker id; it returns
    the job's id) as the tool's go-ahead: once its process is being prepared and before it
    runs anything, so the write and the spawn overlap; and, for a tool that could not be
    started at all, before its failure is recorded. Either way the row comes first.
    """

    def __init__(self, record: Callable[[], int]) -> None:
        self.id: int | None = None
        self._record = record
        self._failure: BaseException | None = None

    @classmethod
    def written(cls, job_id: int) -> JobRow:
        row = cls(lambda: job_id)
        row.id = job_id
        return row

    def write(self) -> int:
        """The job's id, its row written first if that has not happened yet."""
        if self.id is None:
            try:
                self.id = self._record()
            except Exception as exc:
                self._failure = exc
                raise
        return self.id

    def failed_with(self, exc: BaseException) -> bool:
        """Whether `exc` is the one writing the row raised (then there is no row)."""
        return exc is self._failure


@dataclass(frozen=True)
class Executor:
    """Where jobs run: the platform (its one transaction door), the settings, the worker id
    their leases are held under, and the runner."""

    platform: Platform
    settings: Settings
    worker_id: str
    run: RunFn = runner.run

    def execute(self, row: JobRow, call: JobCall) -> Job | None:
        """Run the `running` job of `row`, owned by this worker id, record how it ended and
        return the job as recorded (None when that verdict was not this run's to record).

        Never raises for the tool's misbehaviour; a lost lease ends the run silently; when
        the row could not be written, that exception propagates and nothing ran. Secret
        values (the tool's secrets and `call.secret_args`) are masked in everything
        recorded, even when the tool itself prints them.
        """
        if not telemetry.tracing():
            return self._execute(row, call)
        attributes = {"aat.tool": call.tool.name, "aat.action": call.action.name}
        with spans.run(attributes, parent=self._trace_parent(row)) as span:
            job = self._execute(row, call)
            state = None if job is None else JobState(job.state).value
            spans.set_attributes(span, {"aat.job.id": row.id, "aat.job.state": state})
            if state is not None and state != JobState.succeeded.value:
                spans.failed(span, state)
            return job

    def _trace_parent(self, row: JobRow) -> tuple[str, str] | None:
        """The span of the call that asked for `row`'s job, as its audit trail recorded it."""
        if row.id is None:
            return None  # a job run as it is asked: the asking call's span is the current one
        job_id = row.id
        return self.platform.audit.trace_of(job_id)

    def _execute(self, row: JobRow, call: JobCall) -> Job | None:
        mask = Redactor([*call.secrets.values(), *call.secret_args])
        lease_s = self.settings.worker_lease_s
        try:
            outcome = self.run(
                process_call(self.settings, call, mask),
                on_tick=self.renewer(row),
                tick_s=max(0.05, min(1.0, lease_s / 8)),
                go_ahead=row.write,
            )
        except LeaseLost:
            log.warning("job %d: stopped, it was cancelled or reaped while running", row.id)
            return None
        except Exception as exc:
            if row.failed_with(exc):
                raise  # no row: nothing ran, nothing to record
            # Only the exception's type: its text could quote an argument or a secret.
            log.error("job %d: the runner raised %s", row.write(), type(exc).__name__)
            error = f"the runner failed: {type(exc).__name__}"
            return self.finish(row.write(), Ending(JobState.failed, error=error))
        return self.finish(row.write(), _ending(outcome, mask))

    def renewer(self, row: JobRow) -> Callable[[], None]:
        """A tick callback that renews the lease of `row`'s job a few times per lease period.

        Raises `LeaseLost` when the job is no longer ours, which makes the runner kill the
        subprocess's whole process group.
        """
        last = time.monotonic()
        lease_s = self.settings.worker_lease_s
        failing_since: float | None = None  # the first failed renewal of a run of them

        def renew() -> None:
            nonlocal last, failing_since
            # Renew four times per lease, not on every tick: each renewal is a write. A renewal
            # late by up to three quarters of the lease (a loaded machine) still lands in time.
            if time.monotonic() - last < lease_s / 4:
                return
            last = time.monotonic()
            job_id = row.write()
            try:
                kept = self.platform.leases.renew(job_id, self.worker_id, lease_s)
            except Exception as exc:
                # A database hiccup must not kill the run; if it lasts, the lease runs out.
                # Said once while the database stays away, not on every tick.
                if failing_since is None:
                    failing_since = time.monotonic()
                    log.warning("job %d: lease renewal failed (%s)", job_id, _reason(exc))
                return
            if failing_since is not None:
                away_s, failing_since = time.monotonic() - failing_since, None
                log.warning(
                    "job %d: lease renewed again (the database was away %.1f s)", job_id, away_s
                )
            if not kept:
                raise LeaseLost(job_id)

        return renew

    def finish(self, job_id: int, ending: Ending) -> Job | None:
        """Record a job's outcome unless it was cancelled or reaped meanwhile (that verdict
        stands); the job as recorded, or None when it was not recorded.

        A run that ends while the database cannot be reached (the link cut, the server
        restarting) keeps its outcome and writes it again until the database answers, for up
        to `FINISH_RETRY_S`: recorded then, or refused if the job was reaped as `lost`
        meanwhile. Past that the error propagates and the job is reaped as `lost`."""
        give_up, delay, told = time.monotonic() + FINISH_RETRY_S, 0.2, False
        while True:
            try:
                job = self.platform.jobs.step(
                    leases.finish, job_id=job_id, worker_id=self.worker_id, ending=ending
                )
                break
            except jobs.StaleState as exc:
                log.warning("job %d: result dropped: %s", job_id, exc)
                return None
            except Exception as exc:
                if not unreachable(exc) or time.monotonic() + delay > give_up:
                    raise
                if not told:
                    log.warning(
                        "job %d: ended %s, but the database cannot be reached (%s); "
                        "recording it when it answers",
                        job_id,
                        ending.state.value,
                        type(exc).__name__,
                    )
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        log.info("job %d: %s", job_id, ending.state.value)
        return job


def _reason(exc: BaseException) -> str:
    """Why a statement failed, in one line: the driver's first line for a database that cannot
    be reached (no statement, no parameters), else only the exception's type."""
    if not unreachable(exc):
        return type(exc).__name__
    cause = getattr(exc, "orig", None) or exc
    first = (str(cause).strip().splitlines() or [""])[0]
    return f"{type(cause).__name__}: {first}" if first else type(cause).__name__


def _ending(outcome: RunResult, mask: Redactor) -> Ending:
    """How a run ended, as recorded: secret values masked in all it left."""
    return Ending(
        STATE_OF_OUTCOME.get(outcome.outcome, JobState.failed),
        exit_code=outcome.exit_code,
        result_json=None if outcome.result is None else mask(canonical_json(outcome.result)),
        stdout=mask(outcome.stdout),
        stderr=mask(outcome.stderr),
        error=None if outcome.error is None else mask(outcome.error),
        note=outcome.note,
    )
