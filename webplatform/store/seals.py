"""Signatures on the rows that say who may decide: operators, passkeys, agent tokens, sessions,
and the rules that decide calls in advance.

These rows grant authority (logging in, approving, calling `/mcp`), and anyone who can write
the database can insert or change them without knowing a password. So aat signs each one
with its Ed25519 decision key when it makes or changes it, over the fields that grant the
authority; wherever authority is checked (login, step-up, decision, `/mcp`), a row whose
signature does not verify counts as absent, and the audit trail says so once per row.

This module says which bytes are signed and checks them; the key is loaded above the store
(`webplatform.trust.signing`), and rows without a signature from before the upgrade are adopted
once (`webplatform.trust.authority`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlmodel import Session, select

from webplatform.canonical import canonical_json
from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.models import (
    AgentToken,
    AuditEvent,
    Job,
    JobApproval,
    OAuthGrant,
    OAuthRefreshToken,
    Operator,
    OperatorSession,
    Passkey,
    RuleRow,
    ServerToolPin,
)

FORGED_EVENT = "authority-row-invalid"
# How many verified (row body, signature) pairs a seal remembers before it starts afresh.
VERIFIED_KEPT = 4096
SignedRow = (
    Operator
    | Passkey
    | AgentToken
    | OperatorSession
    | OAuthGrant
    | OAuthRefreshToken
    | RuleRow
    | JobApproval
    | ServerToolPin
)


UNSIGNED = "its signature does not verify (added or changed outside aat)"
REVOKED = "aat revoked, removed or replaced it before (put back outside aat)"


@dataclass(frozen=True)
class Forged:
    """A row that counts as absent: what it is, a fingerprint of its content, and why (its
    signature does not verify, or it is a signed row aat had revoked)."""

    kind: str
    key: str
    fingerprint: str
    why: str = UNSIGNED

    @property
    def detail(self) -> str:
        """The audit line: which row, and that it counts as absent."""
        row = f"[row {self.fingerprint}]"
        return f"{self.kind} {self.key}: {self.why}, so it counts as absent {row}"


class Revocations(Protocol):
    """Signed rows aat revoked, removed or replaced, kept outside the database (the
    fingerprints of their signed content: `webplatform.trust.revocations`). A database writer
    who puts such a row back (a revoked token active again, a removed passkey, an old password
    hash) puts back content whose fingerprint is here, so the row counts as absent."""

    def __contains__(self, fingerprint: object) -> bool:
        """True when a row with this content was revoked."""
        ...

    def add(self, fingerprint: str) -> None:
        """Remember, for good, that a row with this content was revoked."""
        ...


class RowSeal:
    """aat's decision key as it signs and checks authority rows, and the forged rows this
    process has seen but not yet written to the audit trail."""

    def __init__(
        self,
        *,
        private: Ed25519PrivateKey | None,
        public: Sequence[Ed25519PublicKey],
        revoked: Revocations | None = None,
    ) -> None:
        self._private = private
        self._public = list(public)
        # Without a list (a worker's public keys, tests) nothing counts as revoked.
        self.revoked = revoked
        self._lock = threading.Lock()
        self._pending: dict[str, Forged] = {}
        self._reported: set[str] = set()
        self._verified: set[bytes] = set()

    def sign(self, message: bytes) -> str:
        """The signature over `message`, base64 text to store on the row."""
        if self._private is None:
            raise PermissionError("this process holds no decision key: it cannot sign rows")
        return base64.b64encode(self._private.sign(message)).decode("ascii")

    def holds(self, message: bytes, signature: str | None) -> bool:
        """True when `signature` is one of the trusted keys' over exactly `message`.

        A pair that verified is remembered by its SHA-256, and found again instead of checked
        again: the same bytes under the same keys verify the same way. The rules in force are
        read every second (the approvals page, every call's match), a hundred of them a
        hundred Ed25519 checks each time otherwise. A changed row is new bytes: checked.
        """
        pair = hashlib.sha256(
            len(message).to_bytes(8, "big") + message + (signature or "").encode("utf-8")
        ).digest()
        with self._lock:
            if pair in self._verified:
                return True
        try:
            raw = base64.b64decode(signature or "", validate=True)
        except (ValueError, binascii.Error):
            return False
        for key in self._public:
            with contextlib.suppress(InvalidSignature):
                key.verify(raw, message)
                with self._lock:
                    if len(self._verified) >= VERIFIED_KEPT:
                        self._verified.clear()
                    self._verified.add(pair)
                return True
        return False

    def note(self, forged: Forged) -> None:
        """Remember a forged row for the audit trail, unless it was reported already."""
        with self._lock:
            if forged.fingerprint not in self._reported:
                self._pending[forged.fingerprint] = forged

    def has_pending(self) -> bool:
        """True when a forged row waits to be written to the audit trail."""
        return bool(self._pending)

    def take_pending(self) -> list[Forged]:
        """The forged rows not yet reported; they count as reported from now on."""
        with self._lock:
            taken = list(self._pending.values())
            self._pending.clear()
            self._reported.update(f.fingerprint for f in taken)
            return taken

    def give_back(self, forged: list[Forged]) -> None:
        """Put back rows whose report did not commit, so the next attempt writes them."""
        with self._lock:
            for item in forged:
                self._reported.discard(item.fingerprint)
                self._pending[item.fingerprint] = item


def _when(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _fields(
    row: Any, plain: str = "", *, times: str = "", flags: dict[str, str] | None = None
) -> dict[str, Any]:
    """A row's signed body: the `plain` fields as they are, the `times` fields as UTC text,
    and each flag as whether its column is set (space-separated names)."""
    body = {name: getattr(row, name) for name in plain.split()}
    body.update({name: _when(getattr(row, name)) for name in times.split()})
    body.update({flag: getattr(row, column) is not None for flag, column in (flags or {}).items()})
    return body


def _operator(row: Operator) -> tuple[str, str, dict[str, Any]]:
    body = _fields(row, "name role password_hash")
    if row.signed_at is not None:  # left out otherwise: rows signed before keep verifying
        body["signed_at"] = _when(row.signed_at)
    return "operator", row.name, body


def _passkey(row: Passkey) -> tuple[str, str, dict[str, Any]]:
    # `created_at` is signed so that the card's "added 3 h ago" cannot be moved back in time.
    body = _fields(row, "operator credential_id public_key", times="created_at")
    return "passkey", f"{row.id} of {row.operator}", body


def _agent(row: AgentToken) -> tuple[str, str, dict[str, Any]]:
    body = _fields(row, "name owner token_hash", flags={"revoked": "revoked_at"})
    # Only signed-in agents have these; leaving them out otherwise keeps older rows' signatures.
    if row.expires_at is not None:
        body["expires_at"] = _when(row.expires_at)
    if row.resource is not None:
        body["resource"] = row.resource
    return "agent token", row.name, body


def _grant(row: OAuthGrant) -> tuple[str, str, dict[str, Any]]:
    # An allowed grant turns its code into an agent owned by `owner`: all of it is signed, so
    # a row written by SQL mints no agent.
    plain = "request_id client_id params code_hash agent owner"
    body = _fields(row, plain, times="expires_at", flags={"used": "used_at"})
    return "sign-in grant", f"for {row.agent}", body


def _refresh(row: OAuthRefreshToken) -> tuple[str, str, dict[str, Any]]:
    plain = "token_hash agent client_id resource scopes"
    body = _fields(row, plain, times="expires_at", flags={"rotated": "rotated_at"})
    return "refresh token", f"of {row.agent}", body


def _session(row: OperatorSession) -> tuple[str, str, dict[str, Any]]:
    body = _fields(row, "token_hash operator", times="expires_at")
    return "session", f"of {row.operator}", body


def _rule(row: RuleRow) -> tuple[str, str, dict[str, Any]]:
    # Everything that says what it allows, for how long, by whom; not `runs` (a counter).
    plain = "id effect tool action requester cedar max_runs created_by"
    body = _fields(row, plain, times="created_at", flags={"revoked": "revoked_at"})
    body["args"] = row.args_json
    body["expires_at"] = _when(row.expires_at) if row.expires_at else None
    return "rule", str(row.id), body


def _approval(row: JobApproval) -> tuple[str, str, dict[str, Any]]:
    # One operator's approval of one exact call at one time: a copy onto another job, another
    # digest or another operator does not verify.
    body = _fields(row, "job_id operator digest", times="at")
    return "approval", f"of job {row.job_id} by {row.operator}", body


def _pin(row: ServerToolPin) -> tuple[str, str, dict[str, Any]]:
    # The exact definition accepted, by whom and when; not `state` (only accepted rows are
    # signed, and one replaced later is revoked, so putting it back by SQL does not count).
    body = _fields(row, "id server tool digest definition_json accepted_by", times="accepted_at")
    return "server tool", f"{row.server} {row.tool}", body


def approval_name(row: JobApproval) -> str:
    """How the audit trail names an approval row."""
    return f"approval {_approval(row)[1]}"


# Each kind signs under its own prefix, so no signature over one kind of row (or over a
# decision, `aat decision v1`) is ever valid for another.
_KINDS: dict[type, tuple[bytes, Callable[[Any], tuple[str, str, dict[str, Any]]]]] = {
    Operator: (b"aat operator v1\n", _operator),
    Passkey: (b"aat passkey v1\n", _passkey),
    AgentToken: (b"aat agent token v1\n", _agent),
    OperatorSession: (b"aat session v1\n", _session),
    OAuthGrant: (b"aat sign-in grant v1\n", _grant),
    OAuthRefreshToken: (b"aat refresh token v1\n", _refresh),
    RuleRow: (b"aat rule v1\n", _rule),
    JobApproval: (b"aat job approval v1\n", _approval),
    ServerToolPin: (b"aat server tool pin v1\n", _pin),
}
_POLICY = b"aat job policy v1\n"


def message(row: SignedRow) -> bytes:
    """The canonical bytes a row's signature covers."""
    context, describe = _KINDS[type(row)]
    return context + canonical_json(describe(row)[2]).encode("utf-8")


def sign_row(seal: RowSeal, row: SignedRow) -> None:
    """Set `row.signature` over its current content (call after every change to it)."""
    row.signature = seal.sign(message(row))


def content_fingerprint(row: SignedRow) -> str:
    """The sha256 of the bytes a row's signature covers: what a revocation records."""
    return hashlib.sha256(message(row)).hexdigest()


def revoke_row(seal: RowSeal, row: SignedRow) -> None:
    """Remember outside the database that `row`, as it is now, no longer holds: call it
    before revoking, removing or replacing a signed row, so that putting it back by SQL
    puts back a row that counts as absent."""
    if seal.revoked is not None:
        seal.revoked.add(content_fingerprint(row))


def row_holds(seal: RowSeal, row: SignedRow) -> bool:
    """True when the row's signature verifies and aat never revoked it; otherwise the row is
    noted as forged."""
    body = message(row)
    signed = seal.holds(body, row.signature)
    revoked = signed and seal.revoked is not None and content_fingerprint(row) in seal.revoked
    if signed and not revoked:
        return True
    kind, key, _body = _KINDS[type(row)][1](row)
    digest = hashlib.sha256(body + (row.signature or "").encode("ascii", "replace")).hexdigest()
    seal.note(Forged(kind, key, digest[:16], REVOKED if revoked else UNSIGNED))
    return False


def policy_message(job: Job) -> bytes:
    """The bytes a job's `policy_signature` covers: every column that decides how the job is
    treated, fixed when it is recorded (the call and its digest, irreversible, the approvals it
    needs, self-approval and who asked, the requester and what vouched for it, its window, the
    rule that allowed it). A database writer who lowers any of them (approvals 2 to 1,
    self-approval back on, the asker or the window changed) breaks the signature.

    Why signed when the job is recorded, and not only in the decision the approver signs:
    the approver's dashboard reads these columns from the database, so a value lowered
    before the approval would be signed as if it were the truth; only the process that
    recorded the call knew the action's policy and who asked (the asker comes from a signed
    agent token row, which the dashboard cannot recover from a changed `requested_by`).
    Every process that records a job already holds the key (it reads the signed rules on
    every call), so this asks for no key where none was used before. The decision point
    refuses to approve a job whose policy does not verify, and the worker checks it again,
    with the keys it checks decisions with, before it starts one."""
    body = _fields(
        job,
        "id kind name action args_digest irreversible approvals_required self_approval "
        "asked_by_operator requested_by requester_proof client allowed_by_rule edited_from",
        times="created_at",
    )
    body["surface"] = str(job.surface)
    body["expires_at"] = _when(job.expires_at) if job.expires_at else None
    return _POLICY + canonical_json(body).encode("utf-8")


def seal_policy(seal: RowSeal, job: Job) -> str:
    """The signature over `job`'s policy columns (`policy_message`), for `policy_signature`."""
    return seal.sign(policy_message(job))


def policy_problem(seal: RowSeal, job: Job) -> str | None:
    """None when `job`'s policy columns are as aat recorded them; otherwise the one line that
    says so (and the job is noted for the audit trail, once)."""
    body = policy_message(job)
    if seal.holds(body, job.policy_signature):
        return None
    signature = (job.policy_signature or "").encode("ascii", "replace")
    fingerprint = hashlib.sha256(body + signature).hexdigest()[:16]
    seal.note(Forged(kind="policy", key=f"of job {job.id}", fingerprint=fingerprint))
    return (
        f"job {job.id}'s approval policy (approvals needed, self-approval, who asked, its "
        "window) was changed outside aat: its signature does not verify"
    )


def record_forged(*, session: Session, forged: list[Forged]) -> None:
    """Write each forged row to the audit trail, unless the trail already names it."""
    for item in forged:
        seen = select(AuditEvent.id).where(
            AuditEvent.event == FORGED_EVENT, AuditEvent.detail == item.detail
        )
        if session.exec(seen.limit(1)).first() is None:
            record_event(
                session, AuditEntry(actor="system", event=FORGED_EVENT, detail=item.detail)
            )
