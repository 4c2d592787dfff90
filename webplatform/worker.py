"""The worker: claims approved jobs one at a time and runs each at most once.

A claim moves the job to `running` with a lease that the worker renews while the subprocess
runs. A worker that dies stops renewing; any worker's housekeeping then marks the job `lost`,
and nothing ever runs it again. Before the subprocess starts, the worker re-checks the stored
arguments against the digest the operator approved.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sqlalchemy import Engine

from webplatform import jobs
from webplatform.canonical import args_digest, canonical_json
from webplatform.config import Settings
from webplatform.registry.model import ActionSpec, Registry, ToolSpec
from webplatform.store.engine import transact
from webplatform.store.models import Job, JobState

log = logging.getLogger(__name__)

STATE_OF_OUTCOME = {
    "succeeded": JobState.succeeded,
    "failed": JobState.failed,
    "usage_error": JobState.failed,
    "timed_out": JobState.timed_out,
}


class LeaseLost(Exception):
    """Raised from the runner's tick when the job stopped being this worker's to run."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} is no longer running on this worker")
        self.job_id = job_id


class RunResultLike(Protocol):
    """What the worker reads from `webplatform.runner.RunResult`."""

    @property
    def outcome(self) -> str: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def result(self) -> dict[str, Any] | None: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def error(self) -> str | None: ...


class Worker:
    """Executes approved jobs from the shared database; several may run on several hosts."""

    def __init__(
        self,
        *,
        engine: Engine,
        settings: Settings,
        load_registry: Callable[[], Registry],
        run: Callable[..., RunResultLike],
        resolve_secrets: Callable[[Sequence[str]], dict[str, str]],
        worker_id: str | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.load_registry = load_registry
        self.run = run
        self.resolve_secrets = resolve_secrets
        self.worker_id = worker_id or (
            f"{socket.gethostname()}:{os.getpid()}:worker-{uuid.uuid4().hex[:8]}"
        )
        self._last_housekeeping = float("-inf")

    def housekeep(self) -> None:
        """Expire overdue approvals, mark jobs with dead leases lost, and leave a heartbeat."""
        expired = transact(self.engine, lambda s: jobs.expire_due(session=s))
        lost = transact(self.engine, lambda s: jobs.reap_lost(session=s))
        transact(
            self.engine,
            lambda s: jobs.beat(
                session=s,
                process_id=self.worker_id,
                role="worker",
                host=socket.gethostname(),
                pid=os.getpid(),
            ),
        )
        if expired or lost:
            log.info("housekeeping: %d approval(s) expired, %d job(s) lost", expired, lost)
        self._last_housekeeping = time.monotonic()

    def run_once(self) -> bool:
        """Housekeep when due, then claim and run one approved job; False if there was none."""
        if time.monotonic() - self._last_housekeeping >= self.settings.heartbeat_s:
            self.housekeep()
        lease_s = self.settings.worker_lease_s
        job = transact(
            self.engine,
            lambda s: jobs.claim_next(session=s, worker_id=self.worker_id, lease_s=lease_s),
        )
        if job is None:
            return False
        self._execute(job)
        return True

    def run_forever(self, stop: threading.Event, poll_s: float = 0.2) -> None:
        """Run jobs until `stop` is set; an unexpected error is logged and the loop goes on."""
        log.info("worker %s started", self.worker_id)
        while not stop.is_set():
            try:
                busy = self.run_once()
            except Exception:
                log.exception("worker %s: unexpected error; retrying shortly", self.worker_id)
                busy = False
            if not busy:
                stop.wait(poll_s)
        try:
            transact(
                self.engine, lambda s: jobs.forget_heartbeat(session=s, process_id=self.worker_id)
            )
        except Exception:
            log.warning("worker %s: could not remove its heartbeat", self.worker_id)
        log.info("worker %s stopped", self.worker_id)

    def start_thread(self) -> tuple[threading.Thread, threading.Event]:
        """Run `run_forever` in a daemon thread (for `aat serve`); set the event to stop it."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self.run_forever, args=(stop,), name=f"aat-worker-{self.worker_id}", daemon=True
        )
        thread.start()
        return thread, stop

    def _execute(self, job: Job) -> None:
        job_id = job.id or 0
        prepared = self._prepare(job)
        if isinstance(prepared, str):
            log.warning("job %d not run: %s", job_id, prepared)
            self._finish(job_id, JobState.failed, error=prepared)
            return
        tool, action, args, secrets = prepared
        log.info("job %d: running %s %s %s", job_id, job.kind, job.name, job.action)
        try:
            outcome = self.run(
                tool,
                action,
                args,
                home=self.settings.home,
                secrets=secrets,
                on_tick=self._lease_renewer(job_id),
                tick_s=max(0.05, min(1.0, self.settings.worker_lease_s / 4)),
            )
        except LeaseLost:
            log.warning("job %d: stopped, it was cancelled or reaped while running", job_id)
            return
        except Exception as exc:
            # Only the exception's type: its text could quote an argument or a secret.
            log.error("job %d: the runner raised %s", job_id, type(exc).__name__)
            self._finish(job_id, JobState.failed, error=f"the runner failed: {type(exc).__name__}")
            return
        self._finish(
            job_id,
            STATE_OF_OUTCOME.get(outcome.outcome, JobState.failed),
            exit_code=outcome.exit_code,
            result_json=None if outcome.result is None else canonical_json(outcome.result),
            stdout=outcome.stdout,
            stderr=outcome.stderr,
            error=outcome.error,
        )

    def _prepare(
        self, job: Job
    ) -> tuple[ToolSpec, ActionSpec, dict[str, Any], dict[str, str]] | str:
        """What to run, or a one-line reason not to run it."""
        try:
            args = json.loads(job.args_json)
        except ValueError:
            return "the stored arguments are not valid JSON; not run"
        if not isinstance(args, dict):
            return "the stored arguments are not a JSON object; not run"
        digest = args_digest(kind=job.kind, name=job.name, action=job.action, args=args)
        if digest != job.args_digest:
            return (
                "the stored arguments no longer match the approved digest (changed after "
                "approval); not run. Request the call again for a new approval."
            )
        try:
            registry = self.load_registry()
        except Exception as exc:
            return f"the registry could not be loaded ({type(exc).__name__}); not run"
        tool = registry.runnable("agent" if job.kind == "agent" else "tool", job.name)
        if tool is None:
            return f"{job.kind} {job.name!r} is no longer in the registry; not run"
        action = tool.action(job.action)
        if action is None:
            return f"{job.kind} {job.name!r} no longer has action {job.action!r}; not run"
        try:
            secrets = self.resolve_secrets(tool.secrets)
        except Exception as exc:
            return f"the tool's secrets could not be read ({type(exc).__name__}); not run"
        return tool, action, args, secrets

    def _lease_renewer(self, job_id: int) -> Callable[[], None]:
        lease_s = self.settings.worker_lease_s
        last = time.monotonic()

        def renew() -> None:
            nonlocal last
            # Renew a few times per lease, not on every tick: each renewal is a write.
            if time.monotonic() - last < lease_s / 3:
                return
            last = time.monotonic()
            try:
                kept = transact(
                    self.engine,
                    lambda s: jobs.renew_lease(
                        session=s, job_id=job_id, worker_id=self.worker_id, lease_s=lease_s
                    ),
                )
            except Exception as exc:
                # A database hiccup must not kill the run; if it lasts, the lease runs out.
                log.warning("job %d: lease renewal failed (%s)", job_id, type(exc).__name__)
                return
            if not kept:
                # Cancelled, or reaped as lost: the job is no longer ours, so the runner
                # stops the subprocess (it kills the process group when a callback raises).
                raise LeaseLost(job_id)

        return renew

    def _finish(self, job_id: int, state: JobState, **fields: Any) -> None:
        try:
            transact(
                self.engine,
                lambda s: jobs.finish(
                    session=s, job_id=job_id, worker_id=self.worker_id, state=state, **fields
                ),
            )
        except jobs.StaleState as exc:
            # Cancelled or reaped meanwhile: that verdict stands; never retry or re-run.
            log.warning("job %d: result dropped: %s", job_id, exc)
            return
        log.info("job %d: %s", job_id, state.value)


class PlatformLike(Protocol):
    """What `make_worker` needs from `webplatform.services.Platform` (a sibling layer)."""

    @property
    def engine(self) -> Engine: ...
    @property
    def settings(self) -> Settings: ...
    def registry(self) -> Registry: ...


def make_worker(platform: PlatformLike, *, worker_id: str | None = None) -> Worker:
    """A worker wired to the real registry loader, runner and secret store."""
    from webplatform import runner
    from webplatform.registry import resolve_secrets

    return Worker(
        engine=platform.engine,
        settings=platform.settings,
        load_registry=platform.registry,
        run=runner.run,
        resolve_secrets=resolve_secrets,
        worker_id=worker_id,
    )
