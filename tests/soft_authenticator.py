"""A software WebAuthn authenticator, as an attacker would script one: it answers any
challenge for any origin it is told, with a P-256 key it holds in memory. Tests use it to
register and assert passkeys over plain HTTP, without a browser."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url

RP_ID = "localhost"
# User present and user verified; AT: attested credential data follows (registration).
_UP_UV = 0x01 | 0x04
_AT = 0x40


@dataclass
class SoftAuthenticator:
    """One credential: its id, its private key, its signature counter."""

    origin: str
    credential_id: bytes = field(default_factory=lambda: os.urandom(32))
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    count: int = 0

    def cose_public_key(self) -> bytes:
        """The public key as COSE (EC2, ES256), as the browser reports it."""
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps(
            {
                1: 2,
                3: -7,
                -1: 1,
                -2: numbers.x.to_bytes(32, "big"),
                -3: numbers.y.to_bytes(32, "big"),
            }
        )

    def _client_data(self, kind: str, challenge: str) -> bytes:
        return json.dumps(
            {"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": False}
        ).encode()

    def _auth_data(self, flags: int, attested: bytes = b"") -> bytes:
        self.count += 1
        rp_hash = hashlib.sha256(RP_ID.encode()).digest()
        return rp_hash + bytes([flags]) + struct.pack(">I", self.count) + attested

    def register(self, options: dict[str, Any]) -> dict[str, Any]:
        """The `PublicKeyCredential.toJSON()` of a registration for these creation options."""
        attested = (
            b"\0" * 16
            + struct.pack(">H", len(self.credential_id))
            + self.credential_id
            + self.cose_public_key()
        )
        auth_data = self._auth_data(_UP_UV | _AT, attested)
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        client_data = self._client_data("webauthn.create", options["challenge"])
        return {
            "id": bytes_to_base64url(self.credential_id),
            "rawId": bytes_to_base64url(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": bytes_to_base64url(client_data),
                "attestationObject": bytes_to_base64url(attestation),
            },
            "clientExtensionResults": {},
        }

    def assert_for(self, options: dict[str, Any]) -> dict[str, Any]:
        """The `PublicKeyCredential.toJSON()` of an assertion for these request options."""
        auth_data = self._auth_data(_UP_UV)
        client_data = self._client_data("webauthn.get", options["challenge"])
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return {
            "id": bytes_to_base64url(self.credential_id),
            "rawId": bytes_to_base64url(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": bytes_to_base64url(client_data),
                "authenticatorData": bytes_to_base64url(auth_data),
                "signature": bytes_to_base64url(signature),
            },
            "clientExtensionResults": {},
        }


def credential_id_of(credential: dict[str, Any]) -> bytes:
    """The raw credential id of a `toJSON()` credential."""
    return base64url_to_bytes(credential["id"])
