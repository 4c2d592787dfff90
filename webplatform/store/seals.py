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
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlmodel import Session, select

from webplatform.canonical import canonical_json
from webplatform.store.audit import AuditEntry, record_event
from webplatform.store.models import (
    AgentToken,
    AuditEvent,
    OAuthGrant,
    OAuthRefreshToken,
    Operator,
    OperatorSession,
    Passkey,
    RuleRow,
)

FORGED_EVENT = "authority-row-invalid"
# How many verified (row body, signature) pairs a seal remembers before it starts afresh.
VERIFIED_KEPT = 4096
SignedRow = (
    Operator | Passkey | AgentToken | OperatorSession | OAuthGrant | OAuthRefreshToken | RuleRow
)


@dataclass(frozen=True)
class Forged:
    """A row whose signature does not verify: what it is, and a fingerprint of its content."""

    kind: str
    key: str
    fingerprint: str

    @property
    def detail(self) -> str:
        """The audit line: which row, and that it counts as absent."""
        return (
            f"{self.kind} {self.key}: its signature does not verify (added or changed outside "
            f"aat), so it counts as absent [row {self.fingerprint}]"
        )


class RowSeal:
    """aat's decision key as it signs and checks authority rows, and the forged rows this
    process has seen but not yet written to the audit trail."""

    def __init__(
        self, *, private: Ed25519PrivateKey | None, public: Sequence[Ed25519PublicKey]
    ) -> None:
        self._private = private
        self._public = list(public)
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
    return "operator", row.name, _fields(row, "name role password_hash")


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
}


def message(row: SignedRow) -> bytes:
    """The canonical bytes a row's signature covers."""
    context, describe = _KINDS[type(row)]
    return context + canonical_json(describe(row)[2]).encode("utf-8")


def sign_row(seal: RowSeal, row: SignedRow) -> None:
    """Set `row.signature` over its current content (call after every change to it)."""
    row.signature = seal.sign(message(row))


def row_holds(seal: RowSeal, row: SignedRow) -> bool:
    """True when the row's signature verifies; otherwise the row is noted as forged."""
    body = message(row)
    if seal.holds(body, row.signature):
        return True
    kind, key, _body = _KINDS[type(row)][1](row)
    digest = hashlib.sha256(body + (row.signature or "").encode("ascii", "replace")).hexdigest()
    seal.note(Forged(kind=kind, key=key, fingerprint=digest[:16]))
    return False


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
