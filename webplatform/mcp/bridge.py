"""The seven MCP tools of the generic surface, for one process and surface.

Each tool reads its raw arguments itself, so a wrong type is answered with an `invalid`
result that says how to fix the call, never rejected as a protocol error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult

from webplatform.jobs.answers import IN_PROGRESS, Answer, Status, answered
from webplatform.jobs.services import Consent, request_run
from webplatform.jobs.tracking import asked_by, job_answer, no_such_job, recent_of_requester
from webplatform.jobs.withdrawal import DECLINED_IN_CLIENT, withdraw
from webplatform.mcp import naming, native, tasks, waiting
from webplatform.mcp.approvals import ApprovalWatcher
from webplatform.mcp.discovery import discover
from webplatform.mcp.protocol import progress_sender, raw_arguments, request_actor
from webplatform.mcp.results import answer_result, plain_result, tool_result
from webplatform.platform import Actor, Platform
from webplatform.registry.model import ActionSpec, RunnableKind
from webplatform.store.models import Surface
from webplatform.suggest import did_you_mean

ToolFn = Callable[[Context], Coroutine[Any, Any, CallToolResult | InputRequiredResult]]


def _unknown_keys(tool: str, raw: dict[str, Any]) -> Answer | None:
    allowed = list(naming.INPUT_SCHEMAS[tool]["properties"])
    unknown = [k for k in raw if k not in allowed]
    if not unknown:
        return None
    near = {k: did_you_mean(k, allowed) for k in unknown}
    return Answer(
        Status.invalid,
        error=(
            f"{tool} takes {', '.join(allowed)}; "
            f"unknown argument(s) {', '.join(map(repr, unknown))}"
            + (" (tool arguments go inside args)" if tool.startswith("run_") else "")
        ),
        schema=naming.INPUT_SCHEMAS[tool],
        did_you_mean=near,
    )


class Bridge:
    """The seven tools for one process and surface."""

    def __init__(self, platform: Platform, surface: Surface, watcher: ApprovalWatcher) -> None:
        self.platform = platform
        self.surface = surface
        self.watcher = watcher

    @property
    def _max_bytes(self) -> int:
        return self.platform.settings.result_max_bytes

    def _invalid(self, answer: Answer) -> CallToolResult:
        return answer_result(answer, max_bytes=self._max_bytes)

    async def capabilities(self, ctx: Context) -> CallToolResult:
        """`capabilities {kind?, name?, action?, search?}`."""
        raw = raw_arguments(ctx)
        if (problem := _unknown_keys(naming.CAPABILITIES, raw)) is not None:
            return self._invalid(problem)
        registry = await anyio.to_thread.run_sync(self.platform.registry)
        max_bytes = self.platform.settings.capabilities_max_bytes
        body = discover(registry, max_bytes=max_bytes, **raw)
        return plain_result(body, max_bytes=max(max_bytes, self._max_bytes) + 2_000)

    async def get_skill(self, ctx: Context) -> CallToolResult:
        """`get_skill {name}`: the skill's markdown."""
        raw = raw_arguments(ctx)
        if (problem := _unknown_keys(naming.GET_SKILL, raw)) is not None:
            return self._invalid(problem)
        name = raw.get("name")
        registry = await anyio.to_thread.run_sync(self.platform.registry)
        skill = registry.skills.get(name) if isinstance(name, str) else None
        if skill is None:
            near = did_you_mean(name, list(registry.skills)) if isinstance(name, str) else []
            shown = name if isinstance(name, str) else json.dumps(name)[:60]
            return self._invalid(
                Answer(
                    Status.invalid,
                    error=f"no skill named {shown!r}; skills: {', '.join(sorted(registry.skills))}",
                    did_you_mean=near,
                )
            )
        body = {"name": skill.name, "description": skill.description, "markdown": skill.body}
        result = tool_result(body, is_error=False)
        result.content[0].text = skill.body  # type: ignore[union-attr]
        return result

    async def job_status(self, ctx: Context) -> CallToolResult:
        """`job_status {job?, wait_s?}`: the job's answer, after waiting for a change if asked;
        without `job`, this requester's recent jobs. Only the requester's own jobs answer."""
        raw = raw_arguments(ctx)
        if (problem := _unknown_keys(naming.JOB_STATUS, raw)) is not None:
            return self._invalid(problem)
        requester = request_actor(ctx, self.surface)
        job, wait_s = raw.get("job"), raw.get("wait_s", 0)
        if job is None:
            recent = await anyio.to_thread.run_sync(
                lambda: recent_of_requester(platform=self.platform, requester=requester)
            )
            return plain_result(
                {"jobs": recent, "next": "call job_status with a job id for its outcome"},
                max_bytes=self._max_bytes,
            )
        if isinstance(job, str) and job.strip().isdigit():
            job = int(job)
        if (problem := _status_problem(job, wait_s)) is not None:
            return self._invalid(problem)
        assert isinstance(job, int)
        job_id = job
        mine = await anyio.to_thread.run_sync(
            lambda: asked_by(platform=self.platform, job_id=job_id, requester=requester)
        )
        if not mine:
            return self._invalid(no_such_job(job_id))
        await waiting.wait_for_job(
            platform=self.platform,
            job_id=job_id,
            timeout_s=min(float(wait_s or 0), self.platform.settings.approval_wait_s),
            progress=progress_sender(ctx),
            until_change=True,
        )
        answer = await anyio.to_thread.run_sync(
            lambda: job_answer(platform=self.platform, job_id=job_id, requester=requester)
        )
        return answer_result(answer, max_bytes=self._max_bytes, action=self._action_of(answer))

    def result_for(self, answer: Answer) -> CallToolResult:
        """The MCP result for a run-style answer, capped with this action's narrowing hints."""
        return answer_result(answer, max_bytes=self._max_bytes, action=self._action_of(answer))

    def _action_of(self, answer: Answer) -> ActionSpec | None:
        if not answer.tool or not answer.action:
            return None
        registry = self.platform.registry()
        spec = registry.tools.get(answer.tool) or registry.agents.get(answer.tool)
        return spec.action(answer.action) if spec else None

    def runner(self, kind: RunnableKind, *, consent: Consent) -> ToolFn:
        """The `run_*` (`Consent.NONE`) or `run_*_confirmed` (`Consent.QUEUE`) tool for `kind`."""
        tool = f"run_{kind}_confirmed" if consent is Consent.QUEUE else f"run_{kind}"

        async def run(ctx: Context) -> CallToolResult | InputRequiredResult:
            return await self._run(ctx, tool=tool, kind=kind, consent=consent)

        return run

    async def _run(
        self, ctx: Context, *, tool: str, kind: RunnableKind, consent: Consent
    ) -> CallToolResult | InputRequiredResult:
        if (resumed := native.resumed(ctx)) is not None:
            # The retry of a 2026-07-28 `input_required` round: its job is already queued.
            return await self._resume(ctx, *resumed)
        raw = raw_arguments(ctx)
        if (problem := _unknown_keys(tool, raw)) is not None:
            return self._invalid(problem)
        name, action, args = raw.get(kind), raw.get("action"), raw.get("args")
        problem = _check_call(tool, kind, name, action)
        if problem is not None:
            return self._invalid(problem)
        if isinstance(args, str):
            # Some clients send objects as JSON text; accept that, report anything else.
            with suppress(ValueError):
                args = json.loads(args)
        assert isinstance(name, str)  # checked by _check_call
        actor = request_actor(ctx, self.surface)
        progress = progress_sender(ctx)
        answer = await waiting.in_thread(
            lambda: answered(
                request_run,
                platform=self.platform,
                kind=kind,
                name=name,
                action=action,
                args=args,
                actor=actor,
                consent=consent,
                reason=raw.get("reason"),
            ),
            progress=progress,
            what=f"running {name}",
        )
        if answer.job is not None and answer.status in IN_PROGRESS:
            if answer.status is Status.pending_approval:
                await self.watcher.notify()
                if tasks.take(answer):
                    # The client opted in to tasks: the task carries the outcome.
                    return self.result_for(answer)
                if native.is_modern(ctx) and native.url_elicitation_declared(ctx):
                    return native.input_required(
                        answer, wait_s=self.platform.settings.approval_wait_s
                    )
            answer = await self._wait(ctx, answer, actor=actor, progress=progress)
        return answer_result(answer, max_bytes=self._max_bytes, action=self._action_of(answer))

    async def _wait(
        self, ctx: Context, answer: Answer, *, actor: Actor, progress: waiting.Progress
    ) -> Answer:
        """Wait for a job in progress: asking the client to open the job page while it waits
        for an operator, when the client can be asked (2025-11-25 URL elicitation)."""
        assert answer.job is not None
        timeout_s = self.platform.settings.approval_wait_s
        if answer.status is Status.pending_approval and native.can_elicit_now(ctx):
            return await native.wait_with_elicitation(
                ctx=ctx,
                platform=self.platform,
                pending=answer,
                actor=actor,
                timeout_s=timeout_s,
                progress=progress,
            )
        return await waiting.wait_for_job(
            platform=self.platform, job_id=answer.job, timeout_s=timeout_s, progress=progress
        )

    async def _resume(self, ctx: Context, job_id: int, reply: native.Reply) -> CallToolResult:
        """A retried 2026-07-28 call: its job waits, is withdrawn or is answered at once, as
        the client's answer to the job page means (`native.Reply`)."""
        if reply is native.Reply.declined:
            actor = request_actor(ctx, self.surface)
            await anyio.to_thread.run_sync(
                lambda: withdraw(
                    platform=self.platform, job_id=job_id, actor=actor, reason=DECLINED_IN_CLIENT
                )
            )
        waits = reply in (native.Reply.accepted, native.Reply.automatic)
        answer = await waiting.wait_for_job(
            platform=self.platform,
            job_id=job_id,
            timeout_s=self.platform.settings.approval_wait_s if waits else 0.0,
            progress=progress_sender(ctx),
        )
        return answer_result(answer, max_bytes=self._max_bytes, action=self._action_of(answer))


def _status_problem(job: Any, wait_s: Any) -> Answer | None:
    """What is wrong with `job_status`'s arguments, or None."""
    schema = naming.INPUT_SCHEMAS[naming.JOB_STATUS]
    if not isinstance(job, int) or isinstance(job, bool):
        return Answer(
            Status.invalid,
            error="job must be the integer job id from a run result (leave it out to list "
            "your recent jobs)",
            schema=schema,
        )
    if wait_s is not None and (
        not isinstance(wait_s, int | float) or isinstance(wait_s, bool) or wait_s < 0
    ):
        return Answer(
            Status.invalid, error="wait_s must be a number of seconds, 0 or more", schema=schema
        )
    return None


def _check_call(tool: str, kind: str, name: Any, action: Any) -> Answer | None:
    schema = naming.INPUT_SCHEMAS[tool]
    if not isinstance(name, str) or not name:
        return Answer(
            Status.invalid,
            error=f"{tool} needs {kind}: the {kind}'s name (a string)",
            schema=schema,
        )
    if not naming.valid_name(name):
        return Answer(
            Status.invalid,
            tool=name[:100],
            error=f"{name[:100]!r} is not a {kind} name (lower-case letters, digits and -); "
            f"call capabilities to list every {kind}",
            schema=schema,
        )
    if action is not None and not isinstance(action, str):
        return Answer(Status.invalid, tool=name, error="action must be a string", schema=schema)
    return None
