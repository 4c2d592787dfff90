"""Step-up for approvals: the fresh proof, besides the session, that turns a click into a
decision (see `webplatform.stepup` for why and for the value this produces).

Verification lives here, in the dashboard, because only here are the request's parts (the
password typed in the card, the browser's passkey assertion, its origin); `decisions` then
accepts only a `StepUp` made here and checks it names the same operator and digest.
A typed password goes through the login throttle, so a stolen cookie cannot guess it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard import passkeys
from dashboard.auth import LoginLimiter
from webplatform.platform import Platform
from webplatform.stepup import StepUp, StepUpMethod
from webplatform.store import audit, operators
from webplatform.store import passkeys as passkey_store

NEEDED = (
    "approving needs a fresh proof that you are here: type your password in the card "
    "(or use your passkey), then Approve again"
)


class StepUpRefused(PermissionError):
    """No valid step-up came with the decision; the message says what to do."""


@dataclass(frozen=True)
class Proof:
    """What the browser sent with a decision: a typed password and/or a passkey assertion."""

    password: str = ""
    passkey: str = ""


def has_passkey(platform: Platform, operator: str) -> bool:
    """True when the operator has a passkey (the card then offers it first)."""
    return platform.transact(
        lambda session: passkey_store.has_passkey(session=session, operator=operator),
        write=False,
    )


def verify(
    *,
    platform: Platform,
    limiter: LoginLimiter,
    rp: passkeys.RelyingParty,
    operator: str,
    proof: Proof,
    purpose: str,
    digest: str,
    job_id: int | None,
    address: str | None,
) -> StepUp:
    """Check the proof sent with an approval of `digest`; raise StepUpRefused if none holds."""
    if proof.passkey:
        try:
            passkey_id = passkeys.verify_assertion(
                platform=platform,
                rp=rp,
                operator=operator,
                assertion_json=proof.passkey,
                purpose=purpose,
                digest=digest,
                job_id=job_id,
            )
        except passkeys.PasskeyError as exc:
            _refused(platform, operator, address, job_id, "passkey")
            raise StepUpRefused(str(exc)) from None
        return StepUp(
            operator=operator, digest=digest, method=StepUpMethod.passkey, passkey_id=passkey_id
        )
    if proof.password:
        _check_password(platform, limiter, operator, proof.password, address, job_id)
        return StepUp(operator=operator, digest=digest, method=StepUpMethod.password)
    _refused(platform, operator, address, job_id, "none")
    raise StepUpRefused(NEEDED)


def _check_password(
    platform: Platform,
    limiter: LoginLimiter,
    operator: str,
    password: str,
    address: str | None,
    job_id: int | None,
) -> None:
    keys = (f"addr:{address}", f"user:{operator}")
    wait = limiter.attempt(*keys)  # counted before the check, so a burst cannot race it
    if wait > 0:
        raise StepUpRefused(f"too many wrong passwords: wait {int(wait) + 1} s and try again")
    ok = platform.transact(
        lambda session: operators.authenticate(session=session, name=operator, password=password)
    )
    if not ok:
        _refused(platform, operator, address, job_id, "password")
        raise StepUpRefused("wrong password: the call was not approved; type it again")
    limiter.succeeded(*keys)


def _refused(
    platform: Platform, operator: str, address: str | None, job_id: int | None, method: str
) -> None:
    platform.transact(
        lambda session: audit.record_event(
            session=session,
            actor=operator,
            event="step-up-refused",
            job_id=job_id,
            detail=f"approval refused: step-up {method} missing or invalid",
            address=address,
        )
    )
