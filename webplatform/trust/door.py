"""The one trust door for proof and decision: a step-up is verified here (a password, or a
passkey assertion, bound to what it confirms) and the decision it confirms is recorded
through here, from the dashboard and the command line alike.

Where the proof arrived answers the two things only it knows (`Presence`): how a passkey
assertion is checked there (the dashboard's WebAuthn relying party; a terminal has none),
and how typed passwords are throttled there (the dashboard counts them on the operator's
session). The rest is the same everywhere: a proof counts only for an operator whose row
aat signed, a wrong or missing one is audited (`step-up-refused`) and refused with one line
saying what to do, and the `StepUp` it makes names the operator and the digest it was bound
to, which `jobs.decisions` and `trust.changes` check again against what they decide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from webplatform.platform import Platform
from webplatform.store import audit
from webplatform.trust.authority import report_forged
from webplatform.trust.stepup import Change, StepUp, StepUpMethod, change_digest

__all__ = ["Bound", "Change", "Presence", "Proof", "StepUpRefused", "decide", "verify"]

T = TypeVar("T")

NEEDED = (
    "approving needs a fresh proof that you are here: type your password in the card "
    "(or use your passkey), then Approve again"
)
# What each change is called in a refusal ("... needs your current password").
CHANGE_NAMES = {
    Change.passkey_add: "adding a passkey",
    Change.passkey_remove: "removing a passkey",
    Change.password: "changing your password",
    Change.role: "changing a role",
    Change.agent_add: "minting an agent token",
    Change.agent_sign_in: "letting an agent sign in",
    Change.rule_add: "making a rule",
    Change.rule_revoke: "revoking a rule",
    Change.approve_allow: "approving and allowing similar calls",
    Change.server_accept: "accepting a server's tools",
}


class StepUpRefused(PermissionError):
    """No valid step-up came with the decision; the message says what to do."""


@dataclass(frozen=True)
class Proof:
    """What came with a decision: a typed password and/or a passkey assertion."""

    password: str = ""
    passkey: str = ""


@dataclass(frozen=True)
class Bound:
    """What a proof must be for: a purpose, the digest it is bound to, and the queued job."""

    purpose: str
    digest: str
    job_id: int | None = None
    # What the audit trail and the refusal call it.
    what: str = "approval"
    needed: str = NEEDED


def for_change(operator: str, change: Change, target: Mapping[str, str]) -> Bound:
    """What a proof for `change` by `operator` must be bound to."""
    return Bound(
        purpose="change",
        digest=change_digest(operator=operator, change=change, target=target),
        what=f"change ({change.value})",
        needed=f"{CHANGE_NAMES[change]} needs your current password (or one of your "
        "passkeys): type it and try again",
    )


class Presence(Protocol):
    """Where a proof arrived: its platform, how a passkey assertion is checked there, and
    how typed passwords are counted there."""

    @property
    def platform(self) -> Platform:
        """The platform the operator decides on."""
        ...

    def passkey(self, operator: str, assertion: str, bound: Bound) -> int:
        """The id of the passkey that signed `assertion` for exactly `bound`; StepUpRefused
        (its one line) when it did not."""
        ...

    def throttle(self) -> float:
        """Count one typed password; the seconds to wait first (0: go on)."""
        ...

    def passed(self) -> None:
        """The password was right: forget the attempts counted."""
        ...


def verify(
    presence: Presence, *, operator: str, proof: Proof, bound: Bound, address: str | None
) -> StepUp:
    """Check the proof sent for `bound` (an approval, a set of them, or one change); raise
    StepUpRefused if none holds."""
    try:
        return _verify(presence, operator, proof, bound, address)
    finally:
        report_forged(presence.platform)


def decide(
    presence: Presence,
    *,
    operator: str,
    proof: Proof,
    bound: Bound,
    address: str | None,
    record: Callable[[StepUp], T],
) -> T:
    """The trust door: verify the step-up for `bound`, then record the decision it confirms
    (`record`, given the `StepUp`); nothing is recorded when the proof does not hold."""
    step_up = verify(presence, operator=operator, proof=proof, bound=bound, address=address)
    return record(step_up)


def _verify(
    presence: Presence, operator: str, proof: Proof, bound: Bound, address: str | None
) -> StepUp:
    platform = presence.platform
    if proof.passkey:
        try:
            _require_operator(platform, operator)
            passkey_id = presence.passkey(operator, proof.passkey, bound)
        except StepUpRefused:
            _refused(platform, operator, address, bound, "passkey")
            raise
        return StepUp(
            operator=operator,
            digest=bound.digest,
            method=StepUpMethod.passkey,
            passkey_id=passkey_id,
        )
    if proof.password:
        _check_password(presence, operator, proof.password, address, bound)
        return StepUp(operator=operator, digest=bound.digest, method=StepUpMethod.password)
    _refused(platform, operator, address, bound, "none")
    raise StepUpRefused(bound.needed)


def _require_operator(platform: Platform, operator: str) -> None:
    """A passkey proves presence only for an operator whose own row aat signed."""
    row = platform.operators.by_name(operator)
    if row is None:
        raise StepUpRefused(f"{operator} is not an operator aat knows: log in again")


def _check_password(
    presence: Presence, operator: str, password: str, address: str | None, bound: Bound
) -> None:
    """Check `operator`'s password, counted where it was typed (`Presence.throttle`)."""
    platform = presence.platform
    wait = presence.throttle()  # counted before the check, so a burst cannot race it
    if wait > 0:
        raise StepUpRefused(
            f"too many wrong passwords typed in this session: wait {int(wait) + 1} s and try again"
        )
    ok = platform.operators.authenticate(operator, password)
    if not ok:
        _refused(platform, operator, address, bound, "password")
        outcome = "the call was not approved" if bound.purpose != "change" else "nothing changed"
        raise StepUpRefused(f"wrong password: {outcome}; type it again")
    presence.passed()


def _refused(
    platform: Platform, operator: str, address: str | None, bound: Bound, method: str
) -> None:
    platform.audit.record(
        audit.AuditEntry(
            actor=operator,
            event="step-up-refused",
            job_id=bound.job_id,
            detail=f"{bound.what} refused: step-up {method} missing or invalid",
            address=address,
        )
    )


@dataclass(frozen=True)
class Terminal:
    """A proof typed at a terminal (`aat ... --password-stdin`): a password only, and no
    session to count it on (whoever runs `aat` holds this host's database already)."""

    platform: Platform

    def passkey(self, operator: str, assertion: str, bound: Bound) -> int:  # noqa: ARG002
        """A terminal carries no passkey assertion."""
        raise StepUpRefused("a passkey proves presence in the browser only: give a password")

    def throttle(self) -> float:
        """Nothing to wait for."""
        return 0.0

    def passed(self) -> None:
        """Nothing counted."""
