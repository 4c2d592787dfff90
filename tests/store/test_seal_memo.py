"""A seal remembers the (row body, signature) pairs that verified, and only those: a row
changed outside aat is new bytes under an old signature, checked again and refused."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from webplatform.store.seals import VERIFIED_KEPT, RowSeal


def _seal() -> RowSeal:
    key = Ed25519PrivateKey.generate()
    return RowSeal(private=key, public=[key.public_key()])


def test_a_body_changed_under_a_remembered_signature_does_not_verify() -> None:
    seal = _seal()
    body = b'{"effect":"allow","tool":"outbox","expires_at":"2026-12-01T10:00:00+00:00"}'
    signature = seal.sign(body)
    assert seal.holds(body, signature)
    assert seal.holds(body, signature)  # remembered
    widened = body.replace(b"2026-12-01", b"2027-12-01")
    assert not seal.holds(widened, signature)
    assert not seal.holds(body, signature[:-4] + "AAA=")


def test_another_keys_signature_is_not_taken_for_a_remembered_one() -> None:
    seal, other = _seal(), _seal()
    body = b'{"rule":1}'
    assert seal.holds(body, seal.sign(body))
    assert not seal.holds(body, other.sign(body))


def test_a_full_memory_starts_afresh_and_still_verifies() -> None:
    seal = _seal()
    bodies = [f'{{"n":{i}}}'.encode() for i in range(VERIFIED_KEPT + 2)]
    signed = [(body, seal.sign(body)) for body in bodies]
    assert all(seal.holds(body, signature) for body, signature in signed)
    assert all(seal.holds(body, signature) for body, signature in signed[:3])
