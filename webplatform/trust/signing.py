"""Signed decisions: an operator's approval is an Ed25519 signature, not a row.

The dashboard holds the private key (`AAT_HOME/decision-key.pem`, 0600, made on first
start) and signs each decision over the exact call: job id, arguments digest, tool (kind and
name), action, decision, approving operators and time. A worker checks the signature with
the public key (`AAT_DECISION_PUBLIC_KEY`, or `AAT_HOME/decision-key.pub`) before it starts
a job, so a database write alone (a SQL `UPDATE`, a copied row, a changed digest) cannot
make anything run.

For an action with a preview, the decision also covers the digest of the preview the
operator saw (SPEC §20, `Job.preview_digest`): the worker runs the preview again and starts
the call only when it says the same. A decision without one signs the bytes it always did.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from webplatform import keyfiles
from webplatform.canonical import canonical_json
from webplatform.config import Settings
from webplatform.store.models import Job
from webplatform.store.seals import Revocations, RowSeal

PRIVATE_KEY_FILE = "decision-key.pem"
PUBLIC_KEY_FILE = "decision-key.pub"
# Domain separation: these bytes are never a valid signature over anything else aat signs.
_CONTEXT = b"aat decision v1\n"
_PREFIX = "ed25519:"
HOW_TO_GET_KEY = (
    "start `aat serve` once on the dashboard host (it makes the key), or set "
    "AAT_DECISION_PUBLIC_KEY to the line `aat keys show` prints there"
)


@dataclass(frozen=True)
class Decision:
    """What an operator decided about one exact call, as the signature covers it."""

    job_id: int
    digest: str
    kind: str
    name: str
    action: str
    decision: str  # "approved" | "denied"
    operators: tuple[str, ...]
    at: datetime
    # A call allowed by a rule (SPEC §16): the rule, and the requester it was allowed for.
    rule: int | None = None
    requester: str | None = None
    # The digest of the preview the operator approved (SPEC §20); None when none was shown.
    preview: str | None = None

    def message(self) -> bytes:
        """The canonical bytes that are signed: equal decisions, equal bytes."""
        body = {
            "job": self.job_id,
            "digest": self.digest,
            "tool": {"kind": self.kind, "name": self.name},
            "action": self.action,
            "decision": self.decision,
            "operators": list(self.operators),
            "at": self.at.astimezone(UTC).isoformat(timespec="microseconds"),
        }
        if self.rule is not None:  # absent otherwise: decisions signed before still verify
            body |= {"rule": self.rule, "requester": self.requester}
        if self.preview is not None:  # likewise: decisions on calls without one still verify
            body["preview"] = self.preview
        return _CONTEXT + canonical_json(body).encode("utf-8")


def decision_for(job: Job, decision: str, operators: tuple[str, ...], at: datetime) -> Decision:
    """The decision by `operators` at `at` on the exact call a job carries; the one place a
    signed decision is built, for signing (the dashboard) and for checking (the worker)."""
    return Decision(
        job_id=job.id or 0,
        digest=job.args_digest,
        kind=job.kind,
        name=job.name,
        action=job.action,
        decision=decision,
        operators=operators,
        at=at,
        rule=job.allowed_by_rule,
        requester=job.requested_by if job.allowed_by_rule is not None else None,
        preview=job.preview_digest,
    )


def decision_of(job: Job, decision: str) -> Decision | None:
    """The decision a job row claims to carry, or None if it names no operator and time."""
    if job.id is None or not job.decided_by or job.decided_at is None:
        return None
    # Several approvers are stored comma-separated (operator names have no commas).
    operators = tuple(n.strip() for n in job.decided_by.split(","))
    return decision_for(job, decision, operators, job.decided_at)


def public_line(key: Ed25519PublicKey) -> str:
    """One line naming the public key: `ed25519:` and its 32 bytes in base64."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _PREFIX + base64.b64encode(raw).decode("ascii")


def parse_public_key(line: str) -> Ed25519PublicKey:
    """The key a `public_line` names; ValueError saying what to paste instead."""
    text = line.strip()
    try:
        if not text.startswith(_PREFIX):
            raise ValueError
        raw = base64.b64decode(text[len(_PREFIX) :], validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, binascii.Error):
        raise ValueError(
            f"{text[:20]!r}... is not a decision public key: paste the whole line "
            "`aat keys show` prints (ed25519:...)"
        ) from None


class DecisionSigner:
    """The dashboard's private key: signs decisions. Only the dashboard's process loads it."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key

    def public_key(self) -> Ed25519PublicKey:
        """The public half, which workers verify with."""
        return self._key.public_key()

    @property
    def public_line(self) -> str:
        """The public key, as `aat keys show` prints it."""
        return public_line(self._key.public_key())

    def sign(self, decision: Decision) -> str:
        """The signature over `decision`, base64 text to store on the job."""
        return base64.b64encode(self._key.sign(decision.message())).decode("ascii")

    def row_seal(
        self, also_trusted: list[Ed25519PublicKey] | None = None, revoked: Revocations | None = None
    ) -> RowSeal:
        """The same key as it signs authority rows (`webplatform.store.seals`); rows signed by
        `also_trusted` keys (other dashboards' `AAT_DECISION_PUBLIC_KEY`) verify too, and rows
        listed in `revoked` do not."""
        trusted = [self.public_key(), *(also_trusted or [])]
        return RowSeal(private=self._key, public=trusted, revoked=revoked)


class DecisionVerifier:
    """The public key(s) a worker checks decisions with."""

    def __init__(self, keys: list[Ed25519PublicKey]) -> None:
        self.keys = keys

    def problem(self, job: Job, decision: str = "approved") -> str | None:
        """None when the job carries a valid signature for `decision`; otherwise why not."""
        claimed = decision_of(job, decision)
        if claimed is None or not job.decision_signature:
            return (
                f"job {job.id} has no signed {decision} decision (it was made {decision} "
                "outside the dashboard): invalid signature"
            )
        try:
            signature = base64.b64decode(job.decision_signature, validate=True)
        except (ValueError, binascii.Error):
            signature = b""
        for key in self.keys:
            with contextlib.suppress(InvalidSignature):
                key.verify(signature, claimed.message())
                return None
        return (
            f"job {job.id}: invalid signature on its {decision} decision (not made by the "
            "dashboard's decision key for this exact call, operator and time)"
        )


def signer_for(home: Path) -> DecisionSigner:
    """The dashboard's signing key from `home`, created (0600) if there is none yet.

    Several processes starting at once agree on one key: the first to link its file wins.
    """
    path = home / PRIVATE_KEY_FILE
    if not path.exists():
        _create_key(home)
    key = serialization.load_pem_private_key(keyfiles.read_private(path), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise keyfiles.KeyFileError(
            f"{path} is not an Ed25519 key; move it away and restart the dashboard"
        )
    signer = DecisionSigner(key)
    public = home / PUBLIC_KEY_FILE
    if not public.exists() or public.read_text(encoding="ascii").strip() != signer.public_line:
        keyfiles.write(public, (signer.public_line + "\n").encode("ascii"), mode=0o644)
    return signer


def verifier_for(settings: Settings) -> DecisionVerifier:
    """The verifier from `AAT_DECISION_PUBLIC_KEY` (comma-separated lines), else from
    `AAT_HOME`; ValueError saying how to provide a key when there is none."""
    configured = [p for p in settings.decision_public_key.split(",") if p.strip()]
    if configured:
        return DecisionVerifier([parse_public_key(p) for p in configured])
    public = settings.home / PUBLIC_KEY_FILE
    if public.exists():
        return DecisionVerifier([parse_public_key(public.read_text(encoding="ascii"))])
    private = settings.home / PRIVATE_KEY_FILE
    if private.exists():
        return DecisionVerifier([signer_for(settings.home).public_key()])
    raise ValueError(f"no decision public key in {settings.home}: {HOW_TO_GET_KEY}")


def _create_key(home: Path) -> None:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    keyfiles.write(home / PRIVATE_KEY_FILE, pem, mode=0o600, replace=False)
