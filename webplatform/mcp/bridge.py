"""The seven MCP tools of the generic surface, for one process and surface.

Each tool receives its arguments validated against its model (`arguments`); a call the model
refuses is answered by `Bridge.refused` with an `invalid` result that says how to fix it,
never rejected as a protocol error.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from webplatform.jobs.answers import IN_PROGRESS, Answer, Refusal, Status, answered
from webplatform.jobs.resolution import action_schema, resolve_call
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.jobs.tracking import asked_by, job_answer, no_such_job, recent_of_requester
from webplatform.mcp import native, tasks, tracing, waiting
from webplatform.mcp.approvals import ApprovalWatcher
from webplatform.mcp.arguments import (
    MODELS,
    CapabilitiesArguments,
    ConfirmedRunArguments,
    GetSkillArguments,
    JobStatusArguments,
    RunArguments,
    refusal,
    wrong_arguments,
)
from webplatform.mcp.discovery import discover
from webplatform.mcp.protocol import progress_sender, request_actor
from webplatform.mcp.results import answer_result, plain_result, tool_result
from webplatform.platform import Actor, Platform
from webplatform.registry.model import ActionSpec
from webplatform.registry.validation import validate_args
from webplatform.store.models import Surface
from webplatform.suggest import did_you_mean

ToolFn = Callable[..., Coroutine[Any, Any, CallToolResult | InputRequiredResult]]


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

    def refused(self, tool: str, sent: Mapping[str, Any], error: ValidationError) -> CallToolResult:
        """The `invalid` result for a call whose arguments `tool`'s model refused.

        A run call that names its tool and action rightly is answered as the registry
        answers it: an unknown tool or action first, else with the action's name, and args
        of the wrong shape with that action's argument schema (the names to send).
        """
        answer = refusal(tool, sent, error)
        model, wrong = MODELS[tool], wrong_arguments(error)
        if not (answer.tool and issubclass(model, RunArguments)):
            return self._invalid(answer)
        if model.kind in wrong or "action" in wrong:
            return self._invalid(answer)
        action = sent.get("action")
        assert action is None or isinstance(action, str)  # not wrong, so null or a string
        try:
            _spec, act = resolve_call(self.platform.registry(), model.kind, answer.tool, action)
        except Refusal as unknown:
            return self._invalid(unknown.answer)
        if wrong == ["args"]:  # in the registry's words, with the action's argument schema
            line = validate_args(act, sent.get("args"))[1].line
            answer = replace(answer, error=line, schema=action_schema(act))
        return self._invalid(replace(answer, action=act.name))

    async def capabilities(self, arguments: CapabilitiesArguments) -> CallToolResult:
        """`capabilities {kind?, name?, action?, search?}`."""
        registry = await anyio.to_thread.run_sync(self.platform.registry)
        max_bytes = self.platform.settings.capabilities_max_bytes
        body = discover(registry, max_bytes=max_bytes, **arguments.model_dump())
        return plain_result(body, max_bytes=max(max_bytes, self._max_bytes) + 2_000)

    async def get_skill(self, arguments: GetSkillArguments) -> CallToolResult:
        """`get_skill {name}`: the skill's markdown."""
        name = arguments.name
        registry = await anyio.to_thread.run_sync(self.platform.registry)
        skill = registry.skills.get(name)
        if skill is None:
            return self._invalid(
                Answer(
                    Status.invalid,
                    error=f"no skill named {name[:100]!r}; "
                    f"skills: {', '.join(sorted(registry.skills))}",
                    did_you_mean=did_you_mean(name, list(registry.skills)),
                )
            )
        body = {"name": skill.name, "description": skill.description, "markdown": skill.body}
        result = tool_result(body, is_error=False)
        result.content[0].text = skill.body  # type: ignore[union-attr]
        return result

    async def job_status(self, ctx: Context, arguments: JobStatusArguments) -> CallToolResult:
        """`job_status {job?, wait_s?}`: the job's answer, after waiting for a change if asked;
        without `job`, this requester's recent jobs. Only the requester's own jobs answer."""
        requester = request_actor(ctx, self.surface)
        job_id, wait_s = arguments.job, arguments.wait_s or 0.0
        if job_id is None:
            recent = await anyio.to_thread.run_sync(
                lambda: recent_of_requester(platform=self.platform, requester=requester)
            )
            return plain_result(
                {"jobs": recent, "next": "call job_status with a job id for its outcome"},
                max_bytes=self._max_bytes,
            )
        mine = await anyio.to_thread.run_sync(
            lambda: asked_by(platform=self.platform, job_id=job_id, requester=requester)
        )
        if not mine:
            return self._invalid(no_such_job(job_id))
        await waiting.wait_for_job(
            platform=self.platform,
            job_id=job_id,
            timeout_s=min(wait_s, self.platform.settings.approval_wait_s),
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

    async def run(
        self, ctx: Context, arguments: RunArguments
    ) -> CallToolResult | InputRequiredResult:
        """`run_tool` / `run_agent`: a reversible action runs now; an irreversible one is
        refused with `approval_required` (`Consent.NONE`); a call an `ask` rule matches
        waits for an operator as `run_tool_confirmed` would (SPEC §16)."""
        return await self._run(ctx, arguments, consent=Consent.NONE, reason=None)

    async def run_confirmed(
        self, ctx: Context, arguments: ConfirmedRunArguments
    ) -> CallToolResult | InputRequiredResult:
        """`run_tool_confirmed` / `run_agent_confirmed`: an irreversible action is queued for
        an operator (`Consent.QUEUE`), with the agent's reason."""
        return await self._run(ctx, arguments, consent=Consent.QUEUE, reason=arguments.reason)

    async def _run(
        self, ctx: Context, arguments: RunArguments, *, consent: Consent, reason: str | None
    ) -> CallToolResult | InputRequiredResult:
        if (resumed := native.resumed(ctx)) is not None:
            # The retry of a 2026-07-28 `input_required` round: its job is already queued.
            return await self._resume(ctx, *resumed)
        name = arguments.name
        actor = request_actor(ctx, self.surface)
        progress = progress_sender(ctx)
        answer = await waiting.in_thread(
            lambda: answered(
                request_run,
                platform=self.platform,
                call=RunCall(
                    kind=arguments.kind,
                    name=name,
                    action=arguments.action,
                    args=arguments.args,
                    reason=reason,
                ),
                actor=actor,
                consent=consent,
            ),
            progress=progress,
            what=f"running {name}",
            relay=progress.upstream,
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
            waited = self._wait(ctx, answer, actor=actor, progress=progress)
            answer = await tracing.approval_wait(self.platform, answer, waited)
        return answer_result(answer, max_bytes=self._max_bytes, action=self._action_of(answer))

    async def _wait(
        self, ctx: Context, answer: Answer, *, actor: Actor, progress: waiting.Progress
    ) -> Answer:
        """Wait for a job in progress: asking the client to open the job page while it waits
        for an operator, when the client can be asked (2025-11-25 URL elicitation)."""
        assert answer.job is not None
        if answer.status is Status.pending_approval and native.can_elicit_now(ctx):
            return await native.wait_with_elicitation(
                ctx, answer, platform=self.platform, actor=actor, progress=progress
            )
        return await waiting.wait_for_job(
            platform=self.platform,
            job_id=answer.job,
            timeout_s=self.platform.settings.approval_wait_s,
            progress=progress,
        )

    async def _resume(self, ctx: Context, job_id: int, reply: native.Reply) -> CallToolResult:
        """A retried 2026-07-28 call: its job waits, is withdrawn or is answered at once, as
        the client's answer to the job page means (`native.Reply`)."""
        if reply is native.Reply.declined:
            await native.withdraw_declined(self.platform, job_id, request_actor(ctx, self.surface))
        waits = reply in (native.Reply.accepted, native.Reply.automatic)
        answer = await waiting.wait_for_job(
            platform=self.platform,
            job_id=job_id,
            timeout_s=self.platform.settings.approval_wait_s if waits else 0.0,
            progress=progress_sender(ctx),
        )
        return answer_result(answer, max_bytes=self._max_bytes, action=self._action_of(answer))
