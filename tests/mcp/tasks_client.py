"""A Tasks-extension client for the tests, on the SDK's generic client extension API.

The SDK client has no task helpers: `TasksClient` advertises the extension and claims the
`resultType: "task"` shape of `tools/call`; the requests are sent with the session's generic
`send_request`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict, Field

TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(Result):
    """`CreateTaskResult`: the task a `tools/call` answered with."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")


class TaskState(Result):
    """`GetTaskResult`: a task's current state, with `result` once completed."""

    model_config = ConfigDict(extra="allow")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")
    result: dict[str, Any] | None = None


class TaskIdParams(RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param: ClassVar[str | None] = "taskId"


async def _unresolved(task: CreatedTask, ctx: ClaimContext) -> CallToolResult:
    del ctx
    raise AssertionError(f"the tests poll task {task.task_id} themselves")


class TasksClient(ClientExtension):
    """Declares the Tasks extension on every request and accepts task results."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=_unresolved)]


async def call(
    client: Client, tool: str, arguments: dict[str, Any]
) -> CreatedTask | CallToolResult:
    """`tools/call`, returning the task when the server made one."""
    result = await client.session.call_tool(tool, arguments, allow_claimed=True)
    assert isinstance(result, CreatedTask | CallToolResult), result
    return result


async def get(client: Client, task_id: str) -> TaskState:
    """`tasks/get`."""
    return await client.session.send_request(
        GetTask(params=TaskIdParams(taskId=task_id)), TaskState
    )


async def cancel(client: Client, task_id: str) -> None:
    """`tasks/cancel` (an empty acknowledgement)."""
    await client.session.send_request(CancelTask(params=TaskIdParams(taskId=task_id)), Result)
