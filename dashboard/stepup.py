"""Step-up: the fresh proof, besides the session, that turns a click into a decision or a
change of who may decide (see `webplatform.trust.stepup` for why and for the value this produces).

Verification lives here, in the dashboard, because only here are the request's parts (the
password typed with the decision or change, the browser's passkey assertion, its origin);
`decisions` and `changes` then accept only a `StepUp` made here and check it names the same
operator and digest. A typed password goes through the login throttle, so a stolen cookie
cannot guess it; either proof counts only for an operator whose row aat signed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dashboard import passkeys
from dashboard.auth import LoginLimiter
from webplatform.platform import Platform
from webplatform.store import audit
from webplatform.store.models import Passkey, utcnow
from webplatform.store.passkeys import ChallengeFor
from webplatform.trust.authority import report_forged
from webplatform.trust.stepup import Change, StepUp, StepUpMethod, batch_digest, change_digest

BATCH_NEEDED = (
    "approving the selected calls needs a fresh proof that you are here: type your password "
    "beside Approve selected (or use your passkey), then try again"
)
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
}
# The purpose of a passkey challenge that approves several calls at once.
BATCH_PURPOSE = "approve-batch"
# The card warns about a passkey added this recently: it may be an attacker's.
RECENT_PASSKEY = timedelta(days=1)


class StepUpRefused(PermissionError):
    """No valid step-up came with the decision; the message says what to do."""


@dataclass(frozen=True)
class Proof:
    """What the browser sent with a decision: a typed password and/or a passkey assertion."""

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


def for_batch(operator: str, chosen: Sequence[tuple[int, str]]) -> Bound:
    """What a proof approving the calls of `chosen` (job id, digest) at once must be bound
    to: exactly that set (`batch_digest`), for no single job."""
    return Bound(
        purpose=BATCH_PURPOSE,
        digest=batch_digest(operator=operator, chosen=chosen),
        what=f"approval of {len(chosen)} calls at once",
        needed=BATCH_NEEDED,
    )


def usable_passkeys(platform: Platform, operator: str) -> list[Passkey]:
    """The operator's passkeys that count: signed by aat, made for this dashboard's RP ID."""
    rp_id = passkeys.rp_id_for(platform.settings)
    keys = platform.passkeys.of(operator)
    return [key for key in keys if key.rp_id == rp_id]


def has_passkey(platform: Platform, operator: str) -> bool:
    """True when the operator has a passkey that counts (the card then offers it first)."""
    return bool(usable_passkeys(platform, operator))


def passkey_context(platform: Platform, operator: str) -> dict[str, Any]:
    """What the decision forms need to know of the operator's passkeys, in one read:
    `has_passkey`, and `recent_passkey` (the newest, when added within the last day)."""
    keys = usable_passkeys(platform, operator)
    newest = max(keys, key=lambda k: k.created_at) if keys else None
    recent = newest if newest and utcnow() - newest.created_at <= RECENT_PASSKEY else None
    return {"has_passkey": bool(keys), "recent_passkey": recent}


@dataclass(frozen=True)
class Checker:
    """What checks a step-up: the platform, the password throttle (the login throttle, under
    keys of its own) and the session (`auth.session_key`) typed passwords count on, and the
    relying party the browser's passkeys are for.

    Passwords typed in a session count against that session only, never against the
    operator's name or address: failed logins for her name by someone else (anyone who can
    reach `/login`) cannot lock an operator out of the session she is deciding in, and
    guessing still needs her session, five tries per window.
    """

    platform: Platform
    limiter: LoginLimiter
    rp: passkeys.RelyingParty
    session: str = ""


def verify(
    checker: Checker, *, operator: str, proof: Proof, bound: Bound, address: str | None
) -> StepUp:
    """Check the proof sent for `bound` (an approval of one call, or one change); raise
    StepUpRefused if none holds."""
    try:
        return _verify(checker, operator, proof, bound, address)
    finally:
        report_forged(checker.platform)


def _verify(
    checker: Checker, operator: str, proof: Proof, bound: Bound, address: str | None
) -> StepUp:
    platform = checker.platform
    if proof.passkey:
        try:
            _require_operator(platform, operator)
            passkey_id = passkeys.verify_assertion(
                platform=platform,
                rp=checker.rp,
                assertion_json=proof.passkey,
                expected=ChallengeFor(operator, bound.purpose, bound.job_id, bound.digest),
            )
        except passkeys.PasskeyError as exc:
            _refused(platform, operator, address, bound, "passkey")
            raise StepUpRefused(str(exc)) from None
        return StepUp(
            operator=operator,
            digest=bound.digest,
            method=StepUpMethod.passkey,
            passkey_id=passkey_id,
        )
    if proof.password:
        _check_password(checker, operator, proof.password, address, bound)
        return StepUp(operator=operator, digest=bound.digest, method=StepUpMethod.password)
    _refused(platform, operator, address, bound, "none")
    raise StepUpRefused(bound.needed)


def _require_operator(platform: Platform, operator: str) -> None:
    """A passkey proves presence only for an operator whose own row aat signed."""
    row = platform.operators.by_name(operator)
    if row is None:
        raise passkeys.PasskeyError(f"{operator} is not an operator aat knows: log in again")


def _check_password(
    checker: Checker, operator: str, password: str, address: str | None, bound: Bound
) -> None:
    """Check `operator`'s password, counted on the checker's session (see `Checker`)."""
    platform, limiter = checker.platform, checker.limiter
    keys = (f"session:{checker.session}",)
    wait = limiter.attempt(*keys)  # counted before the check, so a burst cannot race it
    if wait > 0:
        raise StepUpRefused(
            f"too many wrong passwords typed in this session: wait {int(wait) + 1} s and try again"
        )
    ok = platform.operators.authenticate(operator, password)
    if not ok:
        _refused(platform, operator, address, bound, "password")
        outcome = "the call was not approved" if bound.purpose != "change" else "nothing changed"
        raise StepUpRefused(f"wrong password: {outcome}; type it again")
    limiter.succeeded(*keys)


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
