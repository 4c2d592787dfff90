"""WebAuthn for the dashboard, with the `webauthn` library: registering an operator's
passkeys, issuing challenges bound to one call, and verifying an assertion against them.

The relying party is where operators open the dashboard: `AAT_PASSKEY_RP_ID` when set, else
the host of an `https` `AAT_DASHBOARD_URL` (a dashboard behind an HTTPS reverse proxy, opened
on a phone), else `localhost`, which browsers treat as a secure context over plain HTTP, so
passkeys work on the loopback dashboard without a certificate. Reached at any other name
(`127.0.0.1`, another host), the page says where to open it instead. Each passkey keeps the
RP ID it was made for: a passkey is bound to it, and the account page shows it.
Challenges live in the database (`webplatform.store.passkeys`), are single-use and expire
after `CHALLENGE_TTL_S`; each is consumed, in its own committed transaction, before the
assertion is checked, so a failed or replayed attempt never finds it again. A registration
challenge is issued only with a step-up for registering (`webplatform.trust.stepup.Change`): the
session cookie alone cannot add a passkey. Passkey rows are signed by aat; an unsigned one
is never offered or accepted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import (
    base64url_to_bytes,
    bytes_to_base64url,
    parse_authentication_credential_json,
    parse_client_data_json,
    parse_registration_credential_json,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticationCredential,
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    RegistrationCredential,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import passkeys as store
from webplatform.store.models import Passkey, WebauthnChallenge
from webplatform.trust.changes import check_change
from webplatform.trust.stepup import Change, StepUp

LOCAL_RP_ID = "localhost"
RP_NAME = "aat"
CHALLENGE_TTL_S = 120.0

T = TypeVar("T")
# What the browser answers: a new passkey, or a passkey's signature.
C = TypeVar("C", RegistrationCredential, AuthenticationCredential)


class PasskeyError(ValueError):
    """A ceremony failed; the message says what to do."""


@dataclass(frozen=True)
class RelyingParty:
    """Where the browser is (the origin an assertion must name) and the RP ID passkeys are
    made for, which the origin must be at for a passkey to work."""

    origin: str
    rp_id: str = LOCAL_RP_ID
    # Where to send an operator who opened the dashboard elsewhere.
    home: str = ""

    @property
    def usable(self) -> bool:
        """True when the page's origin may use passkeys of `rp_id` (WebAuthn's rule: the
        origin's host is the RP ID or below it, over https unless it is localhost)."""
        parts = urlsplit(self.origin)
        host = parts.hostname or ""
        at_rp = host == self.rp_id or host.endswith(f".{self.rp_id}")
        return at_rp and (parts.scheme == "https" or host == LOCAL_RP_ID)


def rp_id_for(settings: Settings) -> str:
    """The RP ID passkeys are made for: AAT_PASSKEY_RP_ID, else the host of an https
    AAT_DASHBOARD_URL, else `localhost`."""
    if settings.passkey_rp_id:
        return settings.passkey_rp_id.lower()
    url = urlsplit(settings.dashboard_url)
    if url.scheme == "https" and url.hostname:
        return url.hostname.lower()
    return LOCAL_RP_ID


def relying_party(settings: Settings, scheme: str, host: str) -> RelyingParty:
    """The relying party for a request that came in with this scheme and (checked) Host."""
    rp_id = rp_id_for(settings)
    if rp_id == LOCAL_RP_ID:
        port = urlsplit(f"{scheme}://{host}").port
        home = f"http://{LOCAL_RP_ID}" + (f":{port}" if port else "")
    elif urlsplit(settings.dashboard_url).hostname == rp_id:
        home = settings.dashboard_url.rstrip("/")
    else:
        home = f"https://{rp_id}"
    return RelyingParty(origin=f"{scheme}://{host}", rp_id=rp_id, home=home)


def _descriptors(keys: list[Passkey]) -> list[PublicKeyCredentialDescriptor]:
    return [PublicKeyCredentialDescriptor(id=base64url_to_bytes(k.credential_id)) for k in keys]


def require_usable(rp: RelyingParty) -> None:
    """Raise PasskeyError, saying where to open the dashboard, unless the page is at the RP."""
    if not rp.usable:
        raise PasskeyError(
            f"passkeys work only when the dashboard is opened at {rp.home}; "
            "open it there (or type your password instead)"
        )


def registration_options(
    *, platform: Platform, rp: RelyingParty, operator: str, step_up: StepUp
) -> str:
    """Options (JSON) for `navigator.credentials.create`, with a stored single-use challenge,
    issued only with `step_up`: the operator's proof for registering a passkey (raises
    `StepUpMismatch` for a proof made for anything else)."""
    require_usable(rp)
    check_change(step_up, by=operator, change=Change.passkey_add, target={})
    existing = _keys(platform, operator)
    options = generate_registration_options(
        rp_id=rp.rp_id,
        rp_name=RP_NAME,
        user_name=operator,
        # A stable handle that is not the name itself.
        user_id=hashlib.sha256(f"aat-operator:{operator}".encode()).digest()[:16],
        exclude_credentials=_descriptors(existing),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
    )
    platform.passkeys.issue_challenge(
        bytes_to_base64url(options.challenge),
        store.ChallengeFor(operator=operator, purpose="register"),
        CHALLENGE_TTL_S,
    )
    return options_to_json(options)


def assertion_options(
    *,
    platform: Platform,
    rp: RelyingParty,
    operator: str,
    purpose: str,
    digest: str,
    job_id: int | None,
) -> str:
    """Options (JSON) for `navigator.credentials.get`, whose challenge can approve only the
    call with `digest` (and job `job_id`, for a queued job), by `operator`, once, soon."""
    require_usable(rp)
    keys = [key for key in _keys(platform, operator) if key.rp_id == rp.rp_id]
    if not keys:
        raise PasskeyError(f"you have no passkey for {rp.rp_id}: add one on your account page")
    options = generate_authentication_options(
        rp_id=rp.rp_id,
        allow_credentials=_descriptors(keys),
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    platform.passkeys.issue_challenge(
        bytes_to_base64url(options.challenge),
        store.ChallengeFor(operator, purpose, job_id, digest),
        CHALLENGE_TTL_S,
    )
    return options_to_json(options)


def _keys(platform: Platform, operator: str) -> list[Passkey]:
    return platform.passkeys.of(operator)


def _take(platform: Platform, client_data_json: bytes) -> WebauthnChallenge | None:
    try:
        challenge = bytes_to_base64url(parse_client_data_json(client_data_json).challenge)
    except WebAuthnException:
        return None
    # Its own transaction, committed now: the challenge is gone whatever happens next.
    return platform.passkeys.take_challenge(challenge)


def _library(check: Callable[..., T], refused: str, /, *args: Any, **kwargs: Any) -> T:
    """`check(*args, **kwargs)`, one of the WebAuthn library's parsers or verifiers; its
    refusal becomes a PasskeyError that starts with `refused`."""
    try:
        return check(*args, **kwargs)
    except WebAuthnException as exc:
        raise PasskeyError(f"{refused}: {exc}") from None


def _answer(
    platform: Platform,
    rp: RelyingParty,
    parse: Callable[[str], C],
    refused: str,
    answer_json: str,
) -> tuple[C, WebauthnChallenge | None]:
    """The browser's answer (a registration or an assertion) as `parse` reads it, a refusal
    starting with `refused`, and the challenge it answered, taken now so it is never answered
    twice (None: unknown, expired or taken already)."""
    require_usable(rp)
    credential = _library(parse, refused, answer_json)
    return credential, _take(platform, credential.response.client_data_json)


def _bound(taken: WebauthnChallenge, rp: RelyingParty) -> dict[str, Any]:
    """What a registration or an assertion must have been made for: the challenge `taken`
    (used up now), this relying party and its origin, and a verified user."""
    return {
        "expected_challenge": base64url_to_bytes(taken.challenge),
        "expected_rp_id": rp.rp_id,
        "expected_origin": rp.origin,
        "require_user_verification": True,
    }


def register(
    *, platform: Platform, rp: RelyingParty, operator: str, credential_json: str, label: str
) -> Passkey:
    """Verify a registration response and store the new passkey's public key."""
    credential, taken = _answer(
        platform,
        rp,
        parse_registration_credential_json,
        "the browser's answer is not a passkey registration",
        credential_json,
    )
    if taken is None or taken.operator != operator or taken.purpose != "register":
        raise PasskeyError("this registration is stale or was already used: start again")
    verified = _library(
        verify_registration_response,
        "the passkey could not be verified",
        credential=credential,
        **_bound(taken, rp),
    )
    new = store.NewPasskey(
        operator=operator,
        credential_id=bytes_to_base64url(verified.credential_id),
        public_key=bytes_to_base64url(verified.credential_public_key),
        sign_count=verified.sign_count,
        label=label,
        rp_id=rp.rp_id,
    )
    return platform.passkeys.add(new)


def verify_assertion(
    *, platform: Platform, rp: RelyingParty, assertion_json: str, expected: store.ChallengeFor
) -> int:
    """Check a passkey assertion made for exactly this call; return the passkey's id.

    The challenge it signed must be unused, unexpired, and issued for `expected` (its
    operator, purpose, job and digest); the signature, origin, RP ID, user verification and
    signature counter are checked by the library. Raises PasskeyError otherwise.
    """
    operator = expected.operator
    credential, taken = _answer(
        platform,
        rp,
        parse_authentication_credential_json,
        "the browser's answer is not a passkey assertion",
        assertion_json,
    )
    if taken is None or taken.operator != operator:
        raise PasskeyError("this passkey confirmation is stale or was already used: try again")
    if (taken.purpose, taken.job_id, taken.digest) != (
        expected.purpose,
        expected.job_id,
        expected.digest,
    ):
        raise PasskeyError(
            "this passkey confirmation was made for another call or change: review this one "
            "and try again"
        )
    key = platform.passkeys.find(operator, credential.id)
    if key is None or key.id is None:
        raise PasskeyError("that passkey is not registered to you: use another, or add it")
    verified = _library(
        verify_authentication_response,
        "the passkey confirmation could not be verified",
        credential=credential,
        credential_public_key=base64url_to_bytes(key.public_key),
        credential_current_sign_count=key.sign_count,
        **_bound(taken, rp),
    )
    platform.passkeys.used(key.id, verified.new_sign_count)
    return key.id
