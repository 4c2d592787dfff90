"""Step-up: the fresh proof, besides the session, that turns a click into a decision or a
change of who may decide (see `webplatform.trust.stepup` for why and for the value this produces).

Verification goes through the trust door (`webplatform.trust.door`), as the command line's
does; the dashboard lends it the two things only the request has: the browser's passkey
assertion, checked against its origin (`Checker.passkey`), and the session a typed password
is counted on (`Checker.throttle`), so a stolen cookie cannot guess it. `decisions` and
`changes` then accept only a `StepUp` made there and check it names the same operator and
digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dashboard import passkeys
from dashboard.auth import LoginLimiter
from webplatform.platform import Platform
from webplatform.store.models import Passkey, utcnow
from webplatform.store.passkeys import ChallengeFor
from webplatform.trust import door
from webplatform.trust.door import CHANGE_NAMES, NEEDED, Bound, Proof, StepUpRefused, for_change
from webplatform.trust.stepup import StepUp, batch_digest

__all__ = [
    "CHANGE_NAMES",
    "NEEDED",
    "Bound",
    "Checker",
    "Proof",
    "StepUpRefused",
    "for_batch",
    "for_change",
    "verify",
]

BATCH_NEEDED = (
    "approving the selected calls needs a fresh proof that you are here: type your password "
    "beside Approve selected (or use your passkey), then try again"
)
# The purpose of a passkey challenge that approves several calls at once.
BATCH_PURPOSE = "approve-batch"
# The card warns about a passkey added this recently: it may be an attacker's.
RECENT_PASSKEY = timedelta(days=1)


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

    def passkey(self, operator: str, assertion: str, bound: Bound) -> int:
        """The passkey that signed `assertion` for exactly `bound`, checked by WebAuthn
        against this dashboard's relying party (the browser's origin)."""
        expected = ChallengeFor(operator, bound.purpose, bound.job_id, bound.digest)
        try:
            return passkeys.verify_assertion(
                platform=self.platform, rp=self.rp, assertion_json=assertion, expected=expected
            )
        except passkeys.PasskeyError as exc:
            raise StepUpRefused(str(exc)) from None

    def throttle(self) -> float:
        """Count one password typed in this session; the seconds to wait first."""
        return self.limiter.attempt(self._key)

    def passed(self) -> None:
        """Forget this session's wrong passwords."""
        self.limiter.succeeded(self._key)

    @property
    def _key(self) -> str:
        return f"session:{self.session}"


def verify(
    checker: Checker, *, operator: str, proof: Proof, bound: Bound, address: str | None
) -> StepUp:
    """Check the proof sent for `bound` through the trust door (`webplatform.trust.door`);
    raise StepUpRefused if none holds."""
    return door.verify(checker, operator=operator, proof=proof, bound=bound, address=address)
