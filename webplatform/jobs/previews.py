"""Previews (SPEC §16): what a queued irreversible call would do, shown before anyone decides.

An irreversible action may name `preview:`, a read-only action of the same tool taking the
same arguments. When such a call is queued, its job row is written with a `pending` preview
row in the same transaction, and the preview then runs in the background of the process
that queued it, through the one runner, with the tool's confinement tightened to no writes
at all (scratch only) and a timeout of `AAT_PREVIEW_TIMEOUT_S`. Its answer (masked, capped)
is kept beside the job for the approval card and the job page.

Nothing here can hold up the queue: the call is answered as soon as its row exists, and a
preview that hangs, fails or floods its output only ends up as an error on the card.

Nor does a preview hold up its process's exit: when the process exits (an MCP client closing
`aat mcp`, `aat serve` stopping) the previews still running are stopped, their process
groups killed and their rows told why. `aat run` waits for its previews (`wait_all`) after
printing its answer, since it would otherwise stop every one it starts.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

from sqlmodel import Session

from webplatform.config import Settings
from webplatform.jobs import execution
from webplatform.platform import Platform
from webplatform.process import runner
from webplatform.process.outcome import RunResult
from webplatform.redaction import Redactor
from webplatform.registry import resolve_secrets
from webplatform.registry.model import ActionSpec, ToolSpec
from webplatform.registry.validation import validate_args
from webplatform.store import previews as store
from webplatform.store.previews import Finished

log = logging.getLogger(__name__)

# What is kept of a preview's output: enough for a long diff or table, small enough to show.
MAX_BYTES = execution.PREVIEW_MAX_BYTES
# Previews running at once in one process; more wait their turn (still `pending`), so a
# burst of queued calls cannot start a burst of processes.
_SLOTS = threading.BoundedSemaphore(4)
# How often a running preview checks whether its process is exiting.
_TICK_S = 0.1
_STOP = threading.Event()
_RUNNING: set[threading.Thread] = set()
_RUNNING_LOCK = threading.Lock()
STOPPED = "stopped before it finished: the aat process running it exited"
# A preview still `pending` this long past its timeout has no process left to finish it.
ORPHAN_AFTER_S = 30.0


class _Stopping(Exception):
    """Raised from the runner's tick when the process is exiting: the runner then kills the
    preview's process group."""


def preview_action(spec: ToolSpec, action: ActionSpec) -> ActionSpec | None:
    """The read-only action that previews `action`, or None (the loader checked the link)."""
    if action.preview is None:
        return None
    target = spec.action(action.preview)
    return target if target is not None and target.read_only else None


def add_pending(session: Session, job_id: int, preview: ActionSpec) -> None:
    """Write the job's `pending` preview row, in the transaction that writes the job."""
    store.add_pending(session=session, job_id=job_id, action=preview.name)


def start(
    platform: Platform, spec: ToolSpec, preview: ActionSpec, args: dict[str, Any], job_id: int
) -> threading.Thread:
    """Run job `job_id`'s preview in a background thread and record how it ended.

    A daemon thread, stopped when the process exits (`stop_all`) rather than keeping it
    alive: a client closing `aat mcp` would otherwise wait, or kill it and orphan the preview.
    """
    thread = threading.Thread(
        target=_tracked,
        kwargs={
            "platform": platform,
            "spec": spec,
            "preview": preview,
            "args": dict(args),
            "job_id": job_id,
        },
        name=f"aat-preview-{job_id}",
        daemon=True,
    )
    with _RUNNING_LOCK:
        _RUNNING.add(thread)
    thread.start()
    return thread


def rerun_orphans(platform: Platform) -> int:
    """Run again, in this process, the previews of calls still waiting whose own process
    ended before their preview did (an in-process `aat mcp` closed by its client, a killed
    one): the card shows a real preview rather than "stopped", and an approval binds it."""
    stale_s = platform.settings.preview_timeout_s + ORPHAN_AFTER_S
    stale_before = platform.jobs.now() - timedelta(seconds=stale_s)
    claimed = platform.jobs.claim_orphan_previews(STOPPED, stale_before)
    for job_id in claimed:
        _restart(platform, job_id)
    return len(claimed)


def _restart(platform: Platform, job_id: int) -> None:
    job = platform.jobs.get(job_id)
    spec = preview = None
    if job is not None:
        kind: Literal["tool", "agent"] = "agent" if job.kind == "agent" else "tool"
        spec = platform.registry().runnable(kind, job.name)
        action = spec.action(job.action) if spec is not None else None
        preview = preview_action(spec, action) if spec is not None and action else None
    if job is None or spec is None or preview is None:
        gone = Finished("failed", None, "its action no longer names a preview")
        platform.jobs.finish_preview(job_id, gone)
        return
    log.info("job %d: its preview's process is gone; running the preview again", job_id)
    start(platform, spec, preview, json.loads(job.args_json), job_id)


def wait_all(timeout_s: float) -> None:
    """Wait up to `timeout_s` in all for the previews this process started to finish."""
    deadline = time.monotonic() + timeout_s
    for thread in _running():
        thread.join(max(0.0, deadline - time.monotonic()))


@atexit.register
def stop_all() -> None:
    """Stop the previews still running and wait (briefly) for their rows to say so."""
    _STOP.set()
    wait_all(5.0)


def _running() -> list[threading.Thread]:
    with _RUNNING_LOCK:
        return list(_RUNNING)


def _tracked(**kwargs: Any) -> None:
    try:
        _run_and_record(**kwargs)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(threading.current_thread())


def tick() -> None:
    """The runner's tick for a preview: raises (and so stops it) when the process exits."""
    if _STOP.is_set():
        raise _Stopping


def _run_and_record(
    *,
    platform: Platform,
    spec: ToolSpec,
    preview: ActionSpec,
    args: dict[str, Any],
    job_id: int,
) -> None:
    try:
        done = _run_in_a_slot(settings=platform.settings, spec=spec, preview=preview, args=args)
    except _Stopping:
        done = Finished("failed", None, STOPPED)
    except Exception as exc:  # the runner's own failure: the card says so, nothing else
        log.error("job %d: the preview's runner raised %s", job_id, type(exc).__name__)
        done = Finished("failed", None, f"the preview could not run: {type(exc).__name__}")
    try:
        platform.jobs.finish_preview(job_id, done)
    except Exception as exc:  # e.g. the database went away: the card keeps "pending"
        log.error("job %d: the preview was not recorded (%s)", job_id, type(exc).__name__)


def _run_in_a_slot(
    *, settings: Settings, spec: ToolSpec, preview: ActionSpec, args: dict[str, Any]
) -> Finished:
    """`run_preview` once one of the process's preview slots is free."""
    while not _SLOTS.acquire(timeout=_TICK_S):
        tick()
    try:
        return run_preview(settings=settings, spec=spec, preview=preview, args=args)
    finally:
        _SLOTS.release()


def run_preview(
    *,
    settings: Settings,
    spec: ToolSpec,
    preview: ActionSpec,
    args: dict[str, Any],
    on_tick: Callable[[], None] = tick,
) -> Finished:
    """Run the preview action with the call's arguments, confined with no writes, and
    describe how it ended (never raises for the tool's misbehaviour). `on_tick` is called
    while it runs (default: stop when the process exits). An upstream server's preview tool
    (SPEC §22) gets those of the arguments it takes: its schema is the server's own."""
    if spec.server is not None:
        args = {name: value for name, value in args.items() if preview.arg(name) is not None}
    clean, problems = validate_args(preview, args)
    if problems:
        return Finished(
            "failed",
            None,
            f"the preview '{preview.name}' refuses this call's arguments ({problems.line}); "
            f"give it the same arguments as the action it previews",
        )
    secrets = resolve_secrets(spec.secrets)
    mask = Redactor(list(secrets.values()))
    job_call = execution.JobCall(spec, preview, clean, secrets)
    call = execution.process_call(settings, job_call, mask, preview=True)
    result = runner.run(call, on_tick=on_tick, tick_s=_TICK_S)
    return finished(result, mask, settings.preview_timeout_s)


def finished(result: RunResult, mask: Redactor, timeout_s: float) -> Finished:
    """What is kept of one preview run: its JSON answer, or its error and what it printed."""
    printed = result.stdout or None  # already masked and cut by the runner
    if result.ok and result.result is not None:
        return Finished("succeeded", mask(json.dumps(result.result, ensure_ascii=False)), None)
    if result.outcome == "timed_out":
        error = (
            f"the preview did not finish within {timeout_s:g} s and was stopped "
            "(AAT_PREVIEW_TIMEOUT_S)"
        )
        return Finished("timed_out", printed, error, result.stdout_truncated)
    if result.stdout_truncated:
        kept = MAX_BYTES // 1024
        error = (
            f"the preview printed more than {kept} KB; only the first {kept} KB are kept, "
            "shown below as text"
        )
        return Finished("failed", printed, error, True)
    return Finished("failed", printed, result.error or "the preview failed")
