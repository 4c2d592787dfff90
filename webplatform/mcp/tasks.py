"""The Tasks extension (`io.modelcontextprotocol/tasks`) for calls that wait for an operator.

A 2026-07-28 client that puts the extension in a request's capabilities gets, for a
`run_*_confirmed` call queued for approval, a task instead of a held call:
`{"resultType": "task", "taskId", "status": "working", ...}` at once. It then polls
`tasks/get`: `working` while the job waits for its decision (and while it runs), then
`completed` with the tool result the call would have returned (`succeeded`, `denied`,
`expired`... as in SPEC section 5). `tasks/cancel` withdraws the request: the job is denied
`withdrawn by the agent` through the ordinary decision path and the task ends `cancelled`.
`tasks/update` is acknowledged (these tasks never ask for input). Every other call, and every
client that did not opt in on that request, is answered exactly as before.

A task is its job: the task id is the job id, its creation time and a digest of its
requester (agent token and client name), packed in 33 bytes and sealed with the bridge's key
(`sealing.py`), so no table holds tasks, any bridge with the same `AAT_HOME` serves them after
a restart, ids cannot be guessed, and another requester's poll or cancel is answered as for an
unknown task. An id is 90 characters: clients cap task ids (Claude Code at 128).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolRequestParams, CallToolResult, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from webplatform.jobs.answers import Answer, Status
from webplatform.jobs.tracking import job_answer
from webplatform.jobs.withdrawal import WITHDRAWN, withdraw
from webplatform.mcp import naming
from webplatform.mcp.protocol import agent_name, client_address, client_name
from webplatform.platform import Actor, Platform
from webplatform.store.models import Surface

logger = logging.getLogger(__name__)

TASKS: Final = "io.modelcontextprotocol/tasks"
# The tools whose queued calls become tasks.
TASK_TOOLS: Final = frozenset({naming.RUN_TOOL_CONFIRMED, naming.RUN_AGENT_CONFIRMED})
POLL_INTERVAL_MS: Final = 1000
# A task id's sealed claims: version, job id, creation time (ms), requester digest (16 bytes).
_ID_VERSION: Final = 2
_ID_CLAIMS: Final = struct.Struct(">BQQ16s")
# The longest task id clients accept (Claude Code's limit); ids are well under it.
MAX_TASK_ID_CHARS: Final = 128


class TaskIdParams(RequestParams):
    """`tasks/get` and `tasks/cancel`: `{taskId}`."""

    task_id: str = Field(alias="taskId")


class UpdateTaskParams(TaskIdParams):
    """`tasks/update`: `{taskId, inputResponses}`."""

    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


@dataclass
class _Offer:
    """Set around a call from a client that opted in: the bridge puts the queued job here
    instead of waiting for it."""

    job: int | None = None


_offer: contextvars.ContextVar[_Offer | None] = contextvars.ContextVar("aat_task", default=None)


def take(answer: Answer) -> bool:
    """Called by the bridge for a call queued for approval: True when a task will carry it
    (the call must answer now), False when the call waits as usual."""
    offer = _offer.get()
    if offer is None or answer.job is None or answer.status is not Status.pending_approval:
        return False
    offer.job = answer.job
    return True


@dataclass(frozen=True)
class _TaskRef:
    job: int
    created_at: datetime


def _owner(ctx: ServerRequestContext[Any, Any]) -> bytes:
    """A digest of who asked: the agent token's name and the client's name."""
    who = json.dumps([agent_name(ctx), client_name(ctx)], separators=(",", ":"))
    return hashlib.sha256(who.encode()).digest()[:16]


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TasksExtension(Extension):
    """Serves `tasks/get`, `tasks/update` and `tasks/cancel`, and turns an opted-in client's
    queued `run_*_confirmed` call into a task."""

    identifier = TASKS

    def __init__(
        self,
        *,
        platform: Platform,
        surface: Surface,
        codec: AESGCMRequestStateCodec,
        render: Callable[[Answer], CallToolResult],
    ) -> None:
        self.platform = platform
        self.surface = surface
        self.codec = codec
        self.render = render

    def methods(self) -> Sequence[MethodBinding]:
        """The three methods the extension defines (2026-07-28 only)."""
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (
            MethodBinding("tasks/get", TaskIdParams, self._get, modern),
            MethodBinding("tasks/update", UpdateTaskParams, self._update, modern),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel, modern),
        )

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        """A queued confirmed call from an opted-in client answers with a new task."""
        if params.name not in TASK_TOOLS or not _declared(ctx):
            return await call_next(ctx)
        offer = _Offer()
        token = _offer.set(offer)
        try:
            result = await call_next(ctx)
        finally:
            _offer.reset(token)
        if offer.job is None:
            return result
        ref = _TaskRef(job=offer.job, created_at=datetime.now(UTC))
        task_id = self._seal(ref, ctx)
        body = await self._task(task_id, ref, ctx)
        logger.info("job %s is task %s...", offer.job, task_id[:12])
        return {"resultType": "task", **body}

    async def _get(
        self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams
    ) -> HandlerResult:
        require_client_extension(ctx, TASKS)
        ref = self._open(params.task_id, ctx, doing="retrieve")
        return await self._task(params.task_id, ref, ctx)

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
    ) -> HandlerResult:
        # These tasks never ask for input: any response is for no outstanding request.
        require_client_extension(ctx, TASKS)
        self._open(params.task_id, ctx, doing="update")
        return {}

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams
    ) -> HandlerResult:
        require_client_extension(ctx, TASKS)
        ref = self._open(params.task_id, ctx, doing="cancel")
        actor = Actor(
            surface=self.surface,
            client=client_name(ctx),
            agent=agent_name(ctx),
            address=client_address(ctx),
        )
        state = await anyio.to_thread.run_sync(
            lambda: withdraw(platform=self.platform, job_id=ref.job, actor=actor)
        )
        if state is None:
            raise _unknown("cancel", f"its job {ref.job} no longer exists")
        return {}

    def _seal(self, ref: _TaskRef, ctx: ServerRequestContext[Any, Any]) -> str:
        at_ms = int(ref.created_at.timestamp() * 1000)
        return self.codec.seal(_ID_CLAIMS.pack(_ID_VERSION, ref.job, at_ms, _owner(ctx)))

    def _open(self, task_id: str, ctx: ServerRequestContext[Any, Any], *, doing: str) -> _TaskRef:
        """The task an id names, for this requester only; else the spec's -32602."""
        try:
            version, job, at_ms, owner = _ID_CLAIMS.unpack(self.codec.unseal(task_id))
            if version != _ID_VERSION:
                raise ValueError(version)
            ref = _TaskRef(job=job, created_at=datetime.fromtimestamp(at_ms / 1000, UTC))
        except (InvalidRequestState, ValueError, struct.error, OverflowError):
            raise _unknown(doing, "no such task") from None
        if owner != _owner(ctx):
            # Another requester's task: answered exactly as an unknown one.
            logger.warning("task for job %s asked for by another requester", ref.job)
            raise _unknown(doing, "no such task")
        return ref

    async def _task(
        self, task_id: str, ref: _TaskRef, ctx: ServerRequestContext[Any, Any]
    ) -> dict[str, Any]:
        """The task's current state as the extension's `DetailedTask`."""
        del ctx
        answer, updated = await anyio.to_thread.run_sync(lambda: self._snapshot(ref.job))
        if answer.status is Status.invalid or updated is None:
            raise _unknown("retrieve", f"its job {ref.job} no longer exists")
        body: dict[str, Any] = {
            "taskId": task_id,
            "createdAt": _iso(ref.created_at),
            "lastUpdatedAt": _iso(max(updated, ref.created_at)),
            "ttlMs": None,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if answer.status is Status.denied and answer.reason == WITHDRAWN:
            body |= {"status": "cancelled", "statusMessage": f"job {ref.job}: {WITHDRAWN}"}
        elif answer.status in (Status.pending_approval, Status.approved, Status.running):
            body |= {"status": "working", "statusMessage": _working_message(answer)}
        else:
            result = self.render(answer).model_dump(by_alias=True, mode="json", exclude_none=True)
            result.pop("resultType", None)
            body |= {
                "status": "completed",
                "statusMessage": f"job {ref.job} {answer.status.value}",
                "result": result,
            }
        return body

    def _snapshot(self, job_id: int) -> tuple[Answer, datetime | None]:
        """The task's answer and when it last changed: an operator's edit makes it the edited
        job's (the answer follows the edit, and so does the time)."""
        answer = job_answer(platform=self.platform, job_id=job_id)
        followed = answer.job if answer.job is not None else job_id
        job = self.platform.jobs.get(followed)
        return answer, (None if job is None else job.updated_at)


def _declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """True when this request's client capabilities name the extension (2026-07-28 only:
    a task result cannot be delivered on the handshake era's wire)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    return bool(caps and caps.extensions and TASKS in caps.extensions)


def _working_message(answer: Answer) -> str:
    if answer.status is Status.pending_approval:
        text = f"job {answer.job} waits for an operator's approval: {answer.approval_url}"
        if answer.approvals_needed and answer.approvals_needed > 1:
            text += f" ({answer.approvals_needed} approvals still needed)"
        if answer.warning:
            text += f"; {answer.warning}"
        return text
    text = f"job {answer.job} is {answer.status.value}"
    # An approval no signature covers is said so (SPEC §20), never shown as one.
    return f"{text}; {answer.warning}" if answer.warning else text


def _unknown(doing: str, why: str) -> MCPError:
    return MCPError(
        code=INVALID_PARAMS,
        message=(
            f"Failed to {doing} task: {why}; task ids come from this client's "
            "run_tool_confirmed or run_agent_confirmed results"
        ),
    )
