"""Running one job (`jobs.execution`): its row comes first, whenever it is written.

A reversible call's row is written as its tool's go-ahead, while the process is prepared
(`JobRow`); these check what the caller sees on each side of that write, with a real store and
the real runner (or a runner that fails on purpose, which is the caller's failure, not a tool's).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from webplatform.canonical import args_digest
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import calls
from webplatform.jobs.execution import Executor, JobCall, JobRow
from webplatform.process import runner
from webplatform.process.outcome import RunResult
from webplatform.registry import RegistryLoader
from webplatform.store import Job, JobState, Surface, transact

ARGS = {"name": "Ada"}


def _hello() -> JobCall:
    tool = RegistryLoader([EXAMPLES_ROOT]).load().runnable("tool", "hello-world")
    assert tool is not None
    action = tool.action("greet")
    assert action is not None
    return JobCall(tool, action, dict(ARGS), {})


class Recorder:
    """`record()` for a `JobRow`: writes the running job's row and counts its calls."""

    def __init__(self, engine: Engine, worker_id: str, lease_s: float) -> None:
        self.engine, self.worker_id, self.lease_s = engine, worker_id, lease_s
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        digest = args_digest(kind="tool", name="hello-world", action="greet", args=ARGS)
        call = calls.Call(
            kind="tool",
            name="hello-world",
            action="greet",
            args=ARGS,
            digest=digest,
            irreversible=False,
            surface=Surface.mcp_stdio,
        )
        start = calls.Running(worker_id=self.worker_id, lease_s=self.lease_s)
        job = transact(self.engine, lambda s: calls.create_job(session=s, call=call, start=start))
        return job.id or 0


def _jobs(engine: Engine) -> int:
    return transact(engine, lambda s: s.exec(select(func.count()).select_from(Job)).one()[0])


@pytest.fixture
def executor(engine: Engine, settings: Settings) -> Executor:
    return Executor(engine, settings, "w-test")


def _recorder(executor: Executor) -> Recorder:
    return Recorder(executor.engine, executor.worker_id, executor.settings.worker_lease_s)


def test_a_job_written_as_the_go_ahead_runs_and_is_recorded_once(executor: Executor) -> None:
    record = _recorder(executor)
    row = JobRow(record)
    job = executor.execute(row, _hello())
    assert job is not None and job.state == JobState.succeeded, job
    assert job.id == row.write() and record.calls == 1
    assert job.result_json == '{"greeting":"Hello, Ada!"}'


def test_a_row_that_cannot_be_written_stops_the_call_and_records_nothing(
    executor: Executor,
) -> None:
    # The write fails once (a database gone for a moment): the call is dropped as it was,
    # not retried into a row recording a failure of a run that never happened.
    failure = RuntimeError("the database is gone")
    writes = _recorder(executor)

    def record() -> int:
        if writes.calls == 0:
            writes.calls += 1
            raise failure
        return writes()

    with pytest.raises(RuntimeError) as raised:
        executor.execute(JobRow(record), _hello())
    assert raised.value is failure  # as it was raised, not wrapped
    assert writes.calls == 1 and _jobs(executor.engine) == 0


@pytest.mark.parametrize("after_go_ahead", [False, True], ids=["before", "after"])
def test_a_runner_that_fails_gets_the_row_written_first_then_its_failure(
    executor: Executor, after_go_ahead: bool
) -> None:
    # Before its go-ahead (nothing could be started) or after it, the job has one row,
    # ending `failed` with the runner's exception's type only (its text could quote a secret).
    def broken(call: runner.ToolCall, **hooks: Any) -> RunResult:
        if after_go_ahead:
            hooks["go_ahead"]()
        raise ValueError(f"could not run {call.args}")

    record = _recorder(executor)
    job = Executor(executor.engine, executor.settings, executor.worker_id, broken).execute(
        JobRow(record), _hello()
    )
    assert job is not None and job.state == JobState.failed
    assert job.error == "the runner failed: ValueError"
    assert record.calls == 1 and _jobs(executor.engine) == 1


def test_a_row_already_written_is_run_as_it_is(executor: Executor) -> None:
    record = _recorder(executor)
    job_id = record()
    job = executor.execute(JobRow.written(job_id), _hello())
    assert job is not None and (job.id, job.state) == (job_id, JobState.succeeded)
    assert record.calls == 1
