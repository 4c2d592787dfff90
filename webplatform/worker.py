"""The worker: claims approved jobs one at a time and runs each at most once.

A claim moves the job to `running` with a lease that the worker renews while the subprocess
runs. A worker that dies stops renewing; any worker's housekeeping then marks the job `lost`,
and nothing ever runs it again. Before the subprocess starts, the worker checks the
approval's signature (`webplatform.trust.signing`) and the job's own policy (its signed policy
columns, and with several approvals each approver's signed row: `webplatform.trust.
decidability.start_problem`), runs the call's preview again when its approval binds one
and sends the call back to its approvers when the preview changed (`webplatform.jobs.
recheck`, SPEC §20), records the decision in this host's ledger of
started decisions (`webplatform.trust.ledger`, which refuses one it has seen or one too old), and
re-checks the stored arguments against the digest the operator approved. `start_claimed` is
that one door: every run of an approved job passes it.

Every job a worker claims was `approved`, and nothing but a decision makes a job approved
(a reversible call runs in its requester's process and never waits in the queue), so every
claimed job must carry a valid signature: no column of the row (`irreversible`, `surface`)
decides whether it is checked, so no SQL edit can switch the check off.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webplatform.canonical import args_digest
from webplatform.config import Settings
from webplatform.housekeeping import Housekeeper, run_passes
from webplatform.jobs import leases, recheck
from webplatform.jobs import states as jobs
from webplatform.jobs.execution import Executor, JobCall, JobRow, RunFn
from webplatform.jobs.leases import Ending
from webplatform.platform import Platform
from webplatform.process import runner
from webplatform.registry import resolve_secrets
from webplatform.registry.model import Registry
from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.door import unreachable
from webplatform.store.models import TOKEN_PROOF, Job, JobApproval, JobState
from webplatform.store.notify import StopEvent
from webplatform.store.seals import RowSeal
from webplatform.store.transitions import call_detail
from webplatform.trust import rulebook, signing
from webplatform.trust.decidability import POLICY_INVALID, start_problem
from webplatform.trust.ledger import DecisionLedger, ledger_for, max_age_s

log = logging.getLogger(__name__)

# An idle worker looks for approved jobs at least this often, even when no wake-up arrives
# (SPEC §20): a row moved into `approved` by SQL sends none, and until a worker fails it the
# job sits there claiming an approval. Each look is one indexed read.
APPROVED_LOOK_S = 5.0


class NotRunnable(Exception):
    """Why an approved job is not run after all: one line, recorded as its error."""


class Worker:
    """Executes approved jobs from the shared database; several may run on several hosts."""

    def __init__(
        self,
        *,
        platform: Platform,
        settings: Settings,
        load_registry: Callable[[], Registry],
        run: RunFn = runner.run,
        worker_id: str | None = None,
        housekeeping: bool = True,
    ) -> None:
        self.platform = platform
        self.settings = settings
        self.load_registry = load_registry
        self.worker_id = worker_id or (
            f"{socket.gethostname()}:{os.getpid()}:worker-{uuid.uuid4().hex[:8]}"
        )
        self.executor = Executor(platform, settings, self.worker_id, run)
        self.housekeeper = Housekeeper(
            platform=platform, settings=settings, process_id=self.worker_id, role="worker"
        )
        # False where another housekeeper of this process does the duties and leaves this
        # worker's heartbeat (`aat serve`'s embedded worker).
        self.housekeeping = housekeeping
        self._housekeeping_due = float("-inf")
        self._problem: str | None = None
        self._cut_off = False  # the last pass could not reach the database
        self._claims_from = float("-inf")  # no claim before then (see `_hand_back`)
        self.ledger: DecisionLedger = ledger_for(settings)

    def run_once(self) -> bool:
        """Housekeep when due, then claim and run one approved job; False if there was none."""
        if self.housekeeping and time.monotonic() >= self._housekeeping_due:
            # A failed pass (it raises) is tried again a heartbeat later, not in a busy loop.
            self._housekeeping_due = time.monotonic() + self.settings.heartbeat_s
            self._housekeeping_due = time.monotonic() + self.housekeeper.run_due()
        if time.monotonic() < self._claims_from:
            return False  # a job was handed back lately: the ledger's trouble is not over
        waiting = self.platform.leases.approved_waiting()
        if not waiting:
            return False  # a read, not a claim's write transaction: idle looks stay cheap
        verifier = self._ready()
        if verifier is None:
            return False
        lease_s = self.settings.worker_lease_s
        job = self.platform.leases.claim_next(self.worker_id, lease_s)
        if job is None:
            return False
        self.start_claimed(job, verifier)
        return True

    def start_claimed(self, job: Job, verifier: signing.DecisionVerifier) -> None:
        """Run a job this worker has just claimed (`running`, its row written) once `admit`
        lets it start, or end it `failed` with the reason `admit` gives."""
        gate = StartGate(
            self.platform, self.settings, verifier, self.ledger, self.worker_id, self.load_registry
        )
        verdict = admit(gate, job)
        if verdict.waits is not None:
            self._hand_back(job, verdict.waits)
        elif verdict.refused is not None:
            event, problem = verdict.refused
            self._refuse(job, event=event, problem=problem)
        elif verdict.starts:
            self._execute(job)

    def _ready(self) -> signing.DecisionVerifier | None:
        """The key to check decisions with, once the ledger can record them; else None, the
        reason logged once: approved jobs then stay queued, untouched."""
        try:
            verifier = signing.verifier_for(self.settings)
            problem = self.ledger.problem()
        except ValueError as exc:
            verifier, problem = None, str(exc)
        if problem is not None:
            if problem != self._problem:
                log.error("worker %s runs nothing: %s", self.worker_id, problem)
            self._problem = problem
            return None
        self._problem = None
        return verifier

    def _hand_back(self, job: Job, problem: str) -> None:
        """Give a job whose decision this host's ledger could not record back to `approved`
        (nothing started, nothing spent), its page saying why, and claim nothing for a
        heartbeat: the ledger's trouble (a full disk, a stopped holder of its lock) is not
        over at once."""
        job_id = job.id or 0
        why = f"approved, not started yet: {problem}; it starts once the ledger can record it"
        log.error("job %d handed back: %s", job_id, problem)
        self._claims_from = time.monotonic() + self.settings.heartbeat_s
        try:
            self.platform.leases.hand_back(job_id, self.worker_id, why)
        except jobs.StaleState as exc:
            log.warning("job %d: not handed back: %s", job_id, exc)

    def _refuse(self, job: Job, *, event: str, problem: str) -> None:
        """End a job whose approval may not start it as failed, and audit why (`event`)."""
        job_id = job.id or 0
        error = f"{problem}; not run. Ask for the call again and approve it in the dashboard."
        log.error("job %d not run: %s", job_id, problem)

        def refuse(session: Any) -> None:
            record_event(
                session,
                AuditEntry(
                    actor=self.worker_id,
                    event=event,
                    job_id=job_id,
                    detail=f"{problem} ({call_detail(job)})",
                ),
            )
            leases.finish(
                session=session,
                job_id=job_id,
                worker_id=self.worker_id,
                ending=Ending(JobState.failed, error=error),
            )

        try:
            self.platform.leases.step(refuse)
        except jobs.StaleState as exc:
            log.warning("job %d: refusal dropped: %s", job_id, exc)

    def run_forever(
        self,
        stop: threading.Event,
        poll_s: float = 0.2,
        listen_poll_s: float = APPROVED_LOOK_S,
    ) -> None:
        """Run jobs until `stop` is set; an unexpected error is logged and the loop goes on.

        Idle, it looks for work every `poll_s`; where job moves wake it (PostgreSQL's
        LISTEN/NOTIFY, SQLite's marker file) it looks when one does, when its housekeeping
        falls due, and every `listen_poll_s` in case a wake-up was lost (a process that
        died between its commit and the signal, a LISTEN connection gone quiet) or never
        sent (a row moved into `approved` by SQL, which this look then fails).
        """
        log.info("worker %s started", self.worker_id)

        def one_pass(listening: bool) -> float | None:
            try:
                if self.run_once():
                    return None  # busy: look again at once
                self._cut_off = False
            except Exception as exc:
                if not unreachable(exc):
                    log.exception("worker %s: unexpected error; retrying shortly", self.worker_id)
                elif not self._cut_off:  # one line while the database stays away
                    log.warning("worker %s: %s; retrying", self.worker_id, _unreachable_line(exc))
                self._cut_off = unreachable(exc)
            wait_s = listen_poll_s if listening else poll_s
            if self.housekeeping:
                wait_s = min(wait_s, self._housekeeping_due - time.monotonic())
            return wait_s

        def moved() -> None:
            self._housekeeping_due = float("-inf")  # a move may bring a deadline closer

        # Without duties of its own (`aat serve`'s worker), only an approval brings it work:
        # the calls the server records and finishes wake it no more.
        only_approved = not self.housekeeping
        run_passes(self.platform.engine, stop, one_pass, on_move=moved, only_approved=only_approved)
        if self.housekeeping:
            self.housekeeper.forget()
        log.info("worker %s stopped", self.worker_id)

    def start_thread(self) -> tuple[threading.Thread, threading.Event]:
        """Run `run_forever` in a daemon thread (for `aat serve`); set the event to stop it."""
        stop = StopEvent()
        thread = threading.Thread(
            target=self.run_forever, args=(stop,), name=f"aat-worker-{self.worker_id}", daemon=True
        )
        thread.start()
        return thread, stop

    def _execute(self, job: Job) -> None:
        job_id = job.id or 0
        try:
            prepared = self._prepare(job)
        except NotRunnable as exc:
            log.warning("job %d not run: %s", job_id, exc)
            self.executor.finish(job_id, Ending(JobState.failed, error=str(exc)))
            return
        log.info("job %d: running %s %s %s", job_id, job.kind, job.name, job.action)
        self.executor.execute(JobRow.written(job_id), prepared)

    def _prepare(self, job: Job) -> JobCall:
        """What to run; `NotRunnable` (a one-line reason) when it must not run."""
        try:
            args = json.loads(job.args_json)
        except ValueError:
            raise NotRunnable("the stored arguments are not valid JSON; not run") from None
        if not isinstance(args, dict):
            raise NotRunnable("the stored arguments are not a JSON object; not run")
        digest = args_digest(kind=job.kind, name=job.name, action=job.action, args=args)
        if digest != job.args_digest:
            raise NotRunnable(
                "the stored arguments no longer match the approved digest (changed after "
                "approval); not run. Request the call again for a new approval."
            )
        try:
            registry = self.load_registry()
        except Exception as exc:
            why = f"the registry could not be loaded ({type(exc).__name__}); not run"
            raise NotRunnable(why) from exc
        tool = registry.runnable("agent" if job.kind == "agent" else "tool", job.name)
        if tool is None:
            raise NotRunnable(f"{job.kind} {job.name!r} is no longer in the registry; not run")
        action = tool.action(job.action)
        if action is None:
            why = f"{job.kind} {job.name!r} no longer has action {job.action!r}; not run"
            raise NotRunnable(why)
        try:
            secrets = resolve_secrets(tool.secrets)
        except Exception as exc:
            why = f"the tool's secrets could not be read ({type(exc).__name__}); not run"
            raise NotRunnable(why) from exc
        return JobCall(tool, action, args, secrets)


def _unreachable_line(exc: BaseException) -> str:
    """The first line of why the database cannot be reached (no statement, no traceback)."""
    cause = exc.__cause__ or exc
    return f"the database cannot be reached ({str(cause).splitlines()[0] or type(cause).__name__})"


@dataclass(frozen=True)
class StartGate:
    """What a worker checks an approved job's start with: its platform and settings, the
    decision key, this host's ledger, its id (for leases and the ledger) and the registry
    loader."""

    platform: Platform
    settings: Settings
    verifier: signing.DecisionVerifier
    ledger: DecisionLedger
    worker_id: str
    load_registry: Callable[[], Registry]


@dataclass(frozen=True)
class Admission:
    """`admit`'s answer: start the job, refuse it (`refused`: the audit event and the
    reason), hand it back to `approved` (`waits`: why this host's ledger could not record its
    decision), or neither (`starts` False, the others None: sent back to wait for approval)."""

    starts: bool
    refused: tuple[str, str] | None = None
    waits: str | None = None  # why it is handed back to `approved`, nothing spent


def admit(gate: StartGate, job: Job) -> Admission:
    """The worker's start-time admission, in order: the approval's signature (the decision
    key), the job's signed policy and co-approvals (`decidability.start_problem`), the
    preview the approval binds run again (`jobs.recheck`: a changed one sends the job back),
    the ledger (a decision new to this host and young enough, recorded before the tool
    starts), and the rule that allowed it. A row in the database alone starts nothing."""
    problem = gate.verifier.problem(job)
    if problem is not None:
        return Admission(False, ("signature-invalid", problem))
    decision = signing.decision_of(job, "approved")
    assert decision is not None  # a verified signature covers a whole decision
    if (unruly := _policy_problem(gate, job, decision)) is not None:
        return Admission(False, (POLICY_INVALID, unruly))
    # Before the ledger: a decision sent back for a changed preview was never started.
    lease_s = gate.settings.worker_lease_s
    if job.preview_digest is not None and recheck.changed_since_approval(
        gate.platform, recheck.Recheck(job, gate.worker_id, lease_s), gate.load_registry
    ):
        return Admission(False)
    max_age = max_age_s(gate.settings)
    now = gate.platform.jobs.now()  # the clock the decision's time was taken from
    spent = gate.ledger.admit(decision, worker_id=gate.worker_id, max_age_s=max_age, now=now)
    if spent is not None and spent.waits:
        return Admission(False, waits=spent.problem)
    if spent is not None:
        return Admission(False, (spent.event, spent.problem))
    if job.allowed_by_rule is not None and (ruled := _rule_problem(gate, job)) is not None:
        return Admission(False, ("rule-invalid", ruled))
    return Admission(True)


def _policy_problem(gate: StartGate, job: Job, decision: signing.Decision) -> str | None:
    """Why `job`'s policy forbids starting it on `decision` (see `start_problem`)."""
    seal = RowSeal(private=None, public=gate.verifier.keys)
    rows: list[JobApproval] = []
    if job.approvals_required > 1:
        rows = gate.platform.jobs.approvals_of(job.id or 0)
    return start_problem(job, decision.operators, rows, seal)


def _rule_problem(gate: StartGate, job: Job) -> str | None:
    """Why the rule that allowed `job` no longer lets it start (SPEC §16), or None once
    one run was taken from its budget."""
    assert job.allowed_by_rule is not None
    requester = job.requested_by if job.requester_proof == TOKEN_PROOF else None
    args = json.loads(job.args_json)
    ask = rulebook.RuleCheck(job.allowed_by_rule, job.name, job.action, requester, args)
    return rulebook.start_problem(gate.platform, ask)


def make_worker(
    platform: Platform, *, worker_id: str | None = None, housekeeping: bool = True
) -> Worker:
    """A worker wired to the real registry loader, runner and secret store (`housekeeping`:
    see `Worker`)."""
    return Worker(
        platform=platform,
        settings=platform.settings,
        load_registry=platform.registry,
        worker_id=worker_id,
        housekeeping=housekeeping,
    )
