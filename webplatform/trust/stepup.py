"""The step-up proof an operator gives to approve an irreversible call, or to change who may
decide (a passkey, a password, a role, an agent token).

A session cookie shows that a browser once logged in; it says nothing about whether the
operator just decided on this call (a stolen cookie and a scraped CSRF token say the same).
Approving therefore also needs a `StepUp`: the operator's password typed with the decision,
or a passkey assertion over a challenge bound to the job's digest.

Verifying the proof is the dashboard's work (it holds the request: the typed password, the
browser's assertion, the origin and RP ID). It hands `webplatform.jobs.decisions` (and the run
form's `services.request_run`) this value, which they check is for the same operator and
digest, and which the approval's audit event names. A change of who may decide is bound the
same way, to the digest of that one change (`change_digest`), and `webplatform.trust.changes`
makes none without it. An import-linter contract keeps the MCP bridge and the command line
from making one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from webplatform.canonical import canonical_json, sha256_hex


class StepUpMethod(StrEnum):
    """How the operator proved presence for one decision."""

    # Their password, typed in the card with the decision.
    password = "password"
    # A passkey assertion over a single-use challenge bound to the call's digest.
    passkey = "passkey"


@dataclass(frozen=True)
class StepUp:
    """A verified proof that `operator` approved the call with `digest`, just now."""

    operator: str
    digest: str
    method: StepUpMethod
    # The passkey's row id, for the audit trail (None for a password).
    passkey_id: int | None = None
    # How many calls one proof approved together (None: this call alone; SPEC §16).
    batch: int | None = None

    def describe(self) -> str:
        """What the audit trail records: the method and which passkey, never a secret."""
        said = (
            f"step-up: passkey {self.passkey_id}"
            if self.method is StepUpMethod.passkey
            else "step-up: password"
        )
        return said + (f", one for {self.batch} calls" if self.batch else "")


class Change(StrEnum):
    """A change of who may decide; each needs a step-up bound to exactly that change."""

    # Register a passkey for yourself (its challenge is issued only after the proof).
    passkey_add = "passkey-add"
    # Remove one of your passkeys (target: its id).
    passkey_remove = "passkey-remove"
    # Change your own password.
    password = "password"
    # An admin gives an operator a role (target: operator and role).
    role = "role"
    # An admin mints an agent token (target: its name).
    agent_add = "agent-add"
    # An operator lets an agent that signs in through the browser act in their name (target:
    # the authorization request and the agent's name; SPEC §18).
    agent_sign_in = "agent-sign-in"
    # An admin makes rules that decide calls in advance (target: the text's digest; SPEC §16).
    rule_add = "rule-add"
    # An admin revokes a rule (target: its id).
    rule_revoke = "rule-revoke"
    # An admin approves one queued call and makes an allow rule from it, in one step (target:
    # the job, its digest and the rule text's digest; `approve_allow_target`; SPEC §16).
    approve_allow = "approve-allow"
    # An admin accepts an upstream MCP server's held tool definitions (target: the server;
    # SPEC §22).
    server_accept = "server-accept"


def change_digest(*, operator: str, change: Change, target: Mapping[str, str]) -> str:
    """The digest a step-up for `change` by `operator` is bound to: sha256 over canonical
    JSON of who changes what, so a proof for one change confirms no other."""
    body = {"change": change.value, "by": operator, "target": dict(target)}
    return sha256_hex(canonical_json(body))


def batch_digest(*, operator: str, chosen: Sequence[tuple[int, str]]) -> str:
    """The digest a step-up approving several queued calls at once is bound to: sha256 over
    canonical JSON of who approves which jobs, each at the digest the page showed, so a proof
    for one set (or for one call) approves no other set."""
    pairs = sorted([job_id, digest] for job_id, digest in chosen)
    body = {"approve": pairs, "by": operator}
    return sha256_hex(canonical_json(body))


def each_in_batch(
    step_up: StepUp, *, operator: str, chosen: Sequence[tuple[int, str]]
) -> dict[int, StepUp]:
    """The proof for each call of `chosen`, taken from `operator`'s one proof for exactly
    that set (raises `StepUpMismatch` for a proof made for any other set or call): each then
    approves its own job at its own digest, as a single approval would."""
    check_step_up(step_up, operator=operator, digest=batch_digest(operator=operator, chosen=chosen))
    return {job_id: replace(step_up, digest=digest, batch=len(chosen)) for job_id, digest in chosen}


class StepUpMismatch(PermissionError):
    """The proof was made for another operator or another call."""


def check_step_up(step_up: StepUp, *, operator: str, digest: str) -> None:
    """Raise `StepUpMismatch` unless the proof is `operator`'s, for exactly `digest`."""
    if step_up.operator != operator:
        raise StepUpMismatch("the step-up proof belongs to another operator")
    if step_up.digest != digest:
        raise StepUpMismatch(
            "the step-up proof was made for another call (digest differs): approve again"
        )


def approve_allow_target(*, job_id: int, digest: str, text: str) -> dict[str, str]:
    """What one proof for approving job `job_id` (the call with `digest`) and making the rule
    `text` together is bound to: all three, so it confirms neither alone, nor any other pair
    (another job, or another rule)."""
    return {"job": str(job_id), "digest": digest, "rule": sha256_hex(text)}


def approval_share(step_up: StepUp, *, target: Mapping[str, str]) -> StepUp:
    """The approval part of a proof bound to approving a call and making a rule together
    (`target`, from `approve_allow_target`): the same proof, for that call's digest alone.
    Raise `StepUpMismatch` unless `step_up` was bound to exactly `target`."""
    bound = change_digest(operator=step_up.operator, change=Change.approve_allow, target=target)
    if step_up.digest != bound:
        raise StepUpMismatch(
            "the step-up proof was made for another call or rule: choose again and confirm"
        )
    return replace(step_up, digest=target["digest"])
