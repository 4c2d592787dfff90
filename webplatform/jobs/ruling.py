"""Calls decided in advance (SPEC §16): the rules in force, asked once per call.

`match(platform, asked)` is the rules' effect on a validated call (or None); `allow(...)`
records a call a rule allows as approved, its decision signed and naming the rule, for the
worker to check again (`trust.rulebook.start_problem`) before it starts it.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import replace
from datetime import UTC, datetime

from webplatform.jobs import calls
from webplatform.jobs.answers import Answer, Refusal, Status
from webplatform.jobs.recording import Asked, Policy, Recording, record_job
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Platform
from webplatform.store import rules as rule_rows
from webplatform.trust import rulebook, signing
from webplatform.trust.policy import policy_for
from webplatform.trust.rule_matching import RuleSet
from webplatform.trust.rules import Call, Match

# How long one process reuses the rules it read: a rule revoked meanwhile is still caught
# by the worker's own check before anything runs.
FRESH_S = 1.0
# Keyed by the platform itself (weakly): an id() could be reused by a later platform.
_cache: weakref.WeakKeyDictionary[Platform, tuple[float, RuleSet]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def rules_now(platform: Platform) -> RuleSet:
    """The rules in force, read at most once a second per platform."""
    now = time.monotonic()
    with _lock:
        kept = _cache.get(platform)
    if kept is not None and now - kept[0] < FRESH_S:
        return kept[1]
    rules = rulebook.in_force(platform)
    with _lock:
        _cache[platform] = (now, rules)
    return rules


def forget(platform: Platform) -> None:
    """Read the rules afresh on the next call (after this process made or revoked one)."""
    with _lock:
        _cache.pop(platform, None)


def match(platform: Platform, asked: Asked) -> Match | None:
    """The rules' effect on `asked` (arguments after defaults), or None when none matches."""
    rules = rules_now(platform)
    if not rules.rules:
        return None
    call = Call(asked.spec.name, asked.action.name, asked.actor.agent, asked.args)
    found = rules.match(call)
    rulebook.report_faults(platform, rules)
    return found


def refuse(asked: Asked, found: Match) -> Refusal:
    """The `refused` answer for a call a deny rule matches, naming the rule."""
    which = ", ".join(found.rules)
    return Refusal(
        Status.refused,
        tool=asked.spec.name,
        action=asked.action.name,
        error=f"refused by rule {which}: an operator decided in advance that this call "
        "may not run; ask an operator if it should",
    )


def allow(platform: Platform, asked: Asked, found: Match, reason: str | None) -> Answer | None:
    """Record `asked` approved by the rule that allows it, and its answer; None when that
    rule is no longer in force (revoked, expired, spent): the caller queues the call."""
    rule_id = int(found.rules[0])
    now = datetime.now(UTC)
    # Read again, not from the cache: a rule spent or revoked since then queues the call.
    # Only this rule, and only its signature checked: not every rule in force on every call.
    row = platform.rules.by_id(rule_id)
    if row is None or not rule_rows.in_force(row, now):
        forget(platform)  # the cache still had it
        return None
    approved = calls.Approved(
        decided_by=row.created_by,
        signer=signing.signer_for(platform.settings.home),
        step_up=f"allowed by rule {rule_id}",
        rule=rule_id,
    )
    policy = policy_for(platform.settings, asked.action)
    job_id = record_job(
        platform=platform,
        asked=replace(asked, irreversible=True),
        how=Recording(start=approved),
        policy=Policy(policy.approvals, policy.self_approval, reason),
    )
    return job_answer(platform=platform, job_id=job_id)
