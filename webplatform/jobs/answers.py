"""The answer every run-style call gets, on every surface.

One shape, one `status` per outcome, so a denial is never confused with an expiry, a
failure or success (SPEC §5). The core refuses a call one way, by raising `Refusal` with the
answer its caller gets; each surface (MCP, dashboard, CLI) turns it back into that answer
(`answered`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, ParamSpec

from webplatform.store.models import UNFINISHED_STATES


class Status(StrEnum):
    """Every outcome a caller can see; the values are a contract with MCP clients."""

    # The tool ran and exited 0; `result` holds its JSON.
    succeeded = "succeeded"
    # The tool ran and did not succeed (exit code, usage error, non-JSON output).
    failed = "failed"
    # The tool ran past its timeout and was killed.
    timed_out = "timed_out"
    # The worker running it died; the job is never re-run by itself.
    lost = "lost"
    # A queued job that was cancelled before it ran.
    cancelled = "cancelled"
    # An operator said no.
    denied = "denied"
    # Nobody decided in time: a refusal, never an approval.
    expired = "expired"
    # Queued and still waiting for an operator; the caller stopped waiting, the job did not.
    pending_approval = "pending_approval"
    # Approved, waiting for a worker.
    approved = "approved"
    # Started, not finished.
    running = "running"
    # `run_tool` was asked for an irreversible action: use the `*_confirmed` tool.
    approval_required = "approval_required"
    # Irreversible calls are switched off (`AAT_MCP_DENY_IRREVERSIBLE=1`).
    refused = "refused"
    # The call itself was wrong: unknown tool, action or argument, wrong type, missing argument.
    invalid = "invalid"


# The statuses of a job that has not finished (one per unfinished job state).
IN_PROGRESS = frozenset(Status(state.value) for state in UNFINISHED_STATES)
NOT_ERRORS = IN_PROGRESS | {Status.succeeded}


@dataclass
class Answer:
    """A run-style result. `to_dict()` drops the fields that do not apply."""

    status: Status
    job: int | None = None
    tool: str | None = None
    action: str | None = None
    result: Any = None
    error: str | None = None
    exit_code: int | None = None
    stderr_tail: str | None = None
    reason: str | None = None
    decided_by: str | None = None
    approval_url: str | None = None
    # Pending: how many more distinct operators must approve before the call runs.
    approvals_needed: int | None = None
    expires_at: str | None = None
    # An operator edited the call before approving it: the job asked for, and the
    # arguments that this job (the edited one) carries and runs with.
    edited_from: int | None = None
    args: dict[str, Any] | None = None
    next: str | None = None
    warning: str | None = None
    # Why the caller's folder was not offered to the tool as a workspace (SPEC §17).
    note: str | None = None
    # The rule that allowed the call without asking (SPEC §16): {rule, by, expires_at}.
    allowed_by: dict[str, Any] | None = None
    use: str | None = None
    schema: Any = None
    did_you_mean: list[str] | dict[str, list[str]] | None = None

    @property
    def is_error(self) -> bool:
        """True for every outcome but success and the in-progress states."""
        return self.status not in NOT_ERRORS

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict without empty fields; `status` first."""
        out = {k: v for k, v in asdict(self).items() if v is not None}
        out["status"] = self.status.value
        return out


class Refusal(Exception):
    """The core will not go on with a call: `answer` is what its caller gets, word for word
    (an `invalid`, `refused` or `approval_required` answer whose `error` says how to fix it)."""

    def __init__(self, status: Status, **fields: Any) -> None:
        self.answer = Answer(status, **fields)
        super().__init__(self.answer.error or status.value)


P = ParamSpec("P")


def answered(fn: Callable[P, Answer], /, *args: P.args, **kwargs: P.kwargs) -> Answer:
    """`fn(*args, **kwargs)`'s answer, or the one its `Refusal` carries: how a surface gives
    its caller the answer to a refused call."""
    try:
        return fn(*args, **kwargs)
    except Refusal as refusal:
        return refusal.answer
