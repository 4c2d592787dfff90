"""Approve and allow similar (SPEC §16): from one queued call, an `allow` rule for calls like
it, made in the same step as the call's approval.

The card's form is filled from the call: its tool, action and requester are fixed; each
argument is matched `exact` (this value) or `any`; the rule lasts 15 minutes, 1 hour or
8 hours. `rule_text` writes the choices in the rules' YAML form, so the rule is checked,
compiled to Cedar and kept by the same code as one written on the Rules page; the text is
also what the step-up is bound to (with the job's digest), so the text depends only on the
job and the choices.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from webplatform.platform import Platform
from webplatform.registry import argmodel
from webplatform.registry.model import ActionSpec, ArgSpec
from webplatform.store.models import TOKEN_PROOF, Job, JobState
from webplatform.trust.policy import Policy, people_needed
from webplatform.trust.rules import RuleError
from webplatform.trust.stepup import approve_allow_target

DURATIONS = ("15m", "1h", "8h")
_HOURS = {"15m": 0.25, "1h": 1.0, "8h": 8.0}
# How much of a long value the form shows beside its select.
_SHOWN = 80


@dataclass(frozen=True)
class SimilarArg:
    """One argument's row in the form: its value as shown, and why only `any` is offered
    (None when `exact` is offered too)."""

    name: str
    shown: str
    only_any: str | None = None


@dataclass(frozen=True)
class SimilarForm:
    """What the card's "Approve and allow similar" form shows."""

    job_id: int
    tool: str
    action: str
    # The agent token's name; None for a call made without one (the rule names no requester).
    requester: str | None
    args: tuple[SimilarArg, ...]
    durations: tuple[str, ...]

    @property
    def fields(self) -> str:
        """The form fields a passkey challenge is bound to (static/passkeys.js reads them)."""
        return " ".join(["duration", *(f"match_{a.name}" for a in self.args if not a.only_any)])


@dataclass(frozen=True)
class Choices:
    """What the operator chose: the arguments matched exactly, and how long the rule lasts."""

    exact: frozenset[str]
    duration: str

    @classmethod
    def of_form(cls, form: Mapping[str, Any]) -> Choices:
        """The choices a submitted form (or a passkey challenge's target) carries."""
        exact = {
            str(key).removeprefix("match_")
            for key, value in form.items()
            if str(key).startswith("match_") and value == "exact"
        }
        return cls(exact=frozenset(exact), duration=str(form.get("duration", "")))


def requester_of(job: Job) -> str | None:
    """The agent token's name the call was made with; None when nothing vouched for one."""
    return job.requested_by if job.requester_proof == TOKEN_PROOF else None


def why_not(job: Job, action: ActionSpec | None) -> str | None:
    """Why no rule can be made from `job`, in one line; None when one can."""
    if job.kind != "tool" or action is None:
        return f"{job.name} {job.action} is not a tool action in the registry: rules name tools"
    if (needed := people_needed(Policy.recorded(job))) is not None:
        return f"{job.name} {job.action} {needed}: no rule stands in for them; use Approve"
    return None


def _only_any(spec: ArgSpec, args: Mapping[str, Any]) -> str | None:
    if spec.secret:
        return "a secret, which is never stored"
    if spec.name not in args:
        return "not given in this call"
    if not argmodel.comparable(spec):
        return f"of type {spec.type}, which a rule cannot compare"
    return None


def form_for(platform: Platform, job: Job, args: Mapping[str, Any]) -> SimilarForm | None:
    """The form for queued `job` whose arguments are `args`; None when no rule can be made."""
    spec = platform.registry().tools.get(job.name)
    action = spec.action(job.action) if spec is not None else None
    if why_not(job, action) is not None or action is None:
        return None
    rows = tuple(
        SimilarArg(arg.name, _shown(args.get(arg.name)), _only_any(arg, args))
        for arg in action.args
    )
    max_hours = platform.settings.rule_max_hours
    durations = tuple(d for d in DURATIONS if _HOURS[d] <= max_hours)
    return SimilarForm(job.id or 0, job.name, job.action, requester_of(job), rows, durations)


def card_form(platform: Platform, job: Job, args_text: str) -> SimilarForm | None:
    """`form_for` queued `job` whose arguments' JSON is `args_text` (the card's, or the job
    page's); None when no rule can be made of it."""
    try:
        args = json.loads(args_text)
    except (TypeError, ValueError):
        return None
    return form_for(platform, job, args) if isinstance(args, dict) else None


def _shown(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def rule_text(job: Job, action: ActionSpec, args: Mapping[str, Any], choices: Choices) -> str:
    """The allow rule the choices make of `job` (a call of `action` with `args`), in the
    rules' YAML form; RuleError when a choice is not one the form offers."""
    if choices.duration not in DURATIONS:
        raise RuleError(f"duration {choices.duration!r}: choose {', '.join(DURATIONS)}")
    for name in sorted(choices.exact):
        spec = action.arg(name)
        only_any = "not an argument of this action" if spec is None else _only_any(spec, args)
        if only_any is not None:
            raise RuleError(f"argument {name!r} is {only_any}: match it with any")
    rule: dict[str, Any] = {"effect": "allow", "tool": job.name, "action": job.action}
    requester = requester_of(job)
    if requester is not None:
        rule["requester"] = requester
    if choices.exact:
        rule["args"] = {name: _exact(args[name]) for name in sorted(choices.exact)}
    else:
        # Every call of the action, said in so many words (trust.rules refuses it otherwise).
        rule["any"] = True
    rule["expires_in"] = choices.duration
    rule["note"] = f"allowed with job {job.id}'s approval"
    return yaml.safe_dump([rule], sort_keys=False, allow_unicode=True, width=10_000)


def _exact(value: Any) -> Any:
    """The condition matching exactly `value`: a string with a wildcard in it would be read as
    a glob, so it is written as the one value of a list."""
    if isinstance(value, str) and ("*" in value or "?" in value):
        return {"one_of": [value]}
    return value


EXPIRED = "job {job} expired before it was approved: it will not run, and no rule was made"


class NotSimilar(ValueError):
    """Why nothing was approved and no rule made, in one line; `status` is the HTTP status."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Prepared:
    """A queued job, the rule text the operator's choices make of it, and what the one
    step-up for both must be bound to."""

    job: Job
    text: str
    target: dict[str, str]


def prepare(platform: Platform, job_id: int, digest: str, form: Mapping[str, Any]) -> Prepared:
    """The rule `form`'s choices make of queued job `job_id`, as the page showed it (`digest`);
    NotSimilar when the job is gone, decided, changed, or no rule can be made of it."""
    job = platform.jobs.get(job_id)
    if job is None:
        raise NotSimilar(f"no job {job_id}: it never existed or was pruned", 404)
    if job.state is JobState.expired:
        raise NotSimilar(EXPIRED.format(job=job_id))
    if job.state is not JobState.pending_approval:
        raise NotSimilar(
            f"job {job_id} is {job.state.value}, no longer waiting: nothing was approved "
            "and no rule was made"
        )
    if digest != job.args_digest:
        raise NotSimilar(
            f"job {job_id}'s arguments are not the ones this page showed: reload the page "
            "and review them again; no rule was made"
        )
    spec = platform.registry().tools.get(job.name)
    action = spec.action(job.action) if spec is not None else None
    if (problem := why_not(job, action)) is not None or action is None:
        raise NotSimilar(problem or "")
    try:
        text = rule_text(job, action, json.loads(job.args_json), Choices.of_form(form))
    except RuleError as exc:
        raise NotSimilar(f"{exc}; nothing was approved", 422) from None
    return Prepared(job, text, approve_allow_target(job_id=job_id, digest=digest, text=text))
