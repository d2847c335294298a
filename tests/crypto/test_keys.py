"""Key pairs, the shared key S, key wrapping and sealed messages (LP-GCN §3, Algorithm 2)."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedgraphrec.crypto.agreement import PUBLIC_KEY_BYTES, ClientKeyPair, PublicKey
from fedgraphrec.crypto.ecies import SEAL_OVERHEAD_BYTES, open_sealed, seal, sealed_size, unwrap_key, wrap_key
from fedgraphrec.crypto.errors import CryptoError, DecryptionError
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.crypto.tokens import ItemTokenizer


@pytest.fixture(scope="module")
def alice() -> ClientKeyPair:
    return ClientKeyPair.generate()


@pytest.fixture(scope="module")
def bob() -> ClientKeyPair:
    return ClientKeyPair.generate()


def _flip(blob: bytes, position: int, mask: int = 0x01) -> bytes:
    out = bytearray(blob)
    out[position] ^= mask
    return bytes(out)


# --- public keys -------------------------------------------------------------------------------------


def test_public_key_round_trips_through_bytes(alice: ClientKeyPair) -> None:
    raw = alice.public.to_bytes()
    assert isinstance(raw, bytes) and len(raw) == PUBLIC_KEY_BYTES
    restored = PublicKey.from_bytes(raw)
    assert restored == alice.public
    assert hash(restored) == hash(alice.public)
    assert PublicKey.from_bytes(bytearray(raw)) == alice.public  # type: ignore[arg-type]


def test_public_keys_of_different_pairs_differ(alice: ClientKeyPair, bob: ClientKeyPair) -> None:
    assert alice.public != bob.public


@pytest.mark.parametrize("length", [0, 1, 31, 33, 64])
def test_public_key_of_wrong_length_is_rejected(length: int) -> None:
    with pytest.raises(ValueError, match=rf"exactly 32 bytes, got {length}"):
        PublicKey.from_bytes(b"\x09" * length)


def test_public_key_of_wrong_type_is_rejected(alice: ClientKeyPair) -> None:
    with pytest.raises(TypeError, match="public key must be bytes, got str"):
        PublicKey.from_bytes(alice.public.to_bytes().hex())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "raw",
    [bytes(32), (1).to_bytes(32, "little")],
    ids=["zero", "one"],
)
def test_low_order_public_key_is_rejected(raw: bytes) -> None:
    with pytest.raises(ValueError, match="low-order point"):
        PublicKey.from_bytes(raw)


def test_non_canonical_public_key_is_rejected(alice: ClientKeyPair) -> None:
    raw = _flip(alice.public.to_bytes(), 31, 0x80)
    with pytest.raises(ValueError, match="bit 255"):
        PublicKey.from_bytes(raw)


def test_public_key_repr_shows_only_a_fingerprint(alice: ClientKeyPair) -> None:
    text = repr(alice.public)
    assert alice.public.fingerprint in text
    assert alice.public.fingerprint == hashlib.sha256(alice.public.to_bytes()).hexdigest()[:8]
    assert alice.public.to_bytes().hex() not in text


# --- key pairs ---------------------------------------------------------------------------------------


def test_key_pair_repr_hides_private_key(alice: ClientKeyPair) -> None:
    text = repr(alice) + str(alice)
    assert alice.private_bytes().hex() not in text
    assert alice.public.fingerprint in text


def test_key_pair_restores_from_private_bytes(alice: ClientKeyPair) -> None:
    restored = ClientKeyPair.from_private_bytes(alice.private_bytes())
    assert restored.public == alice.public
    blob = wrap_key(b"k" * 32, alice.public)
    assert unwrap_key(blob, restored) == b"k" * 32


def test_key_pair_rejects_bad_private_material() -> None:
    with pytest.raises(ValueError, match="exactly 32 bytes, got 16"):
        ClientKeyPair.from_private_bytes(b"\x01" * 16)
    with pytest.raises(TypeError, match="X25519PrivateKey"):
        ClientKeyPair(b"\x01" * 32)  # type: ignore[arg-type]


# --- shared key S ------------------------------------------------------------------------------------


def test_shared_key_round_trips_and_is_random() -> None:
    s = SharedKey.generate()
    assert len(s.to_bytes()) == 32
    assert SharedKey.from_bytes(s.to_bytes()) == s
    assert SharedKey.generate() != s


def test_shared_key_repr_hides_key_bytes() -> None:
    s = SharedKey.generate()
    for text in (repr(s), str(s), f"{s!r}", repr([s])):
        assert s.to_bytes().hex() not in text
        assert s.to_bytes().hex().upper() not in text
    assert "hidden" in repr(s)


@pytest.mark.parametrize("length", [0, 16, 31, 33])
def test_shared_key_of_wrong_length_is_rejected(length: int) -> None:
    with pytest.raises(ValueError, match=rf"exactly 32 bytes, got {length}"):
        SharedKey.from_bytes(b"\x07" * length)


def test_all_zero_shared_key_is_rejected() -> None:
    with pytest.raises(ValueError, match="all zero"):
        SharedKey.from_bytes(bytes(32))


def test_shared_key_is_unhashable() -> None:
    with pytest.raises(TypeError):
        hash(SharedKey.generate())


def test_subkeys_are_deterministic_and_purpose_bound() -> None:
    s = SharedKey.from_bytes(bytes(range(1, 33)))
    assert s.subkey("item-token") == SharedKey.from_bytes(bytes(range(1, 33))).subkey("item-token")
    assert s.subkey("item-token") != s.subkey("embedding")
    assert SharedKey.generate().subkey("item-token") != s.subkey("item-token")
    assert len(s.subkey("embedding")) == 32
    assert s.subkey("embedding") != s.to_bytes()


def test_subkey_matches_rfc5869_hkdf_written_with_stdlib_hmac() -> None:
    ikm = bytes(range(1, 33))
    prk = hmac.digest(bytes(32), ikm, "sha256")  # HKDF-Extract with the default all-zero salt
    okm = hmac.digest(prk, b"fedgraphrec/subkey/v1/item-token" + b"\x01", "sha256")  # one Expand block
    assert SharedKey.from_bytes(ikm).subkey("item-token") == okm


def test_subkey_purpose_is_validated() -> None:
    s = SharedKey.generate()
    with pytest.raises(ValueError, match="non-empty"):
        s.subkey("")
    with pytest.raises(TypeError, match="purpose must be a str"):
        s.subkey(b"embedding")  # type: ignore[arg-type]


# --- wrap / unwrap -----------------------------------------------------------------------------------


def test_wrap_unwrap_round_trip(alice: ClientKeyPair) -> None:
    s = SharedKey.generate()
    blob = wrap_key(s.to_bytes(), alice.public)
    assert len(blob) == sealed_size(32) == 92
    assert SharedKey.from_bytes(unwrap_key(blob, alice)) == s


def test_wrapping_is_randomized(alice: ClientKeyPair) -> None:
    s = SharedKey.generate().to_bytes()
    first, second = wrap_key(s, alice.public), wrap_key(s, alice.public)
    assert first != second
    assert first[:32] != second[:32]  # fresh ephemeral key each time
    assert unwrap_key(first, alice) == unwrap_key(second, alice) == s


def test_unwrap_by_wrong_recipient_fails(alice: ClientKeyPair, bob: ClientKeyPair) -> None:
    blob = wrap_key(SharedKey.generate().to_bytes(), alice.public)
    with pytest.raises(DecryptionError, match="different recipient"):
        unwrap_key(blob, bob)


def test_every_flipped_byte_of_a_wrapped_key_fails(alice: ClientKeyPair) -> None:
    blob = wrap_key(SharedKey.generate().to_bytes(), alice.public)
    for position in range(len(blob)):  # ephemeral key, nonce, ciphertext and tag
        with pytest.raises(DecryptionError):
            unwrap_key(_flip(blob, position), alice)


def test_flipping_the_masked_bit_of_the_ephemeral_key_fails(alice: ClientKeyPair) -> None:
    # X25519 ignores bit 255 of a u-coordinate, so the DH output is unchanged; the key derivation
    # binds the raw bytes, so the blob must still be rejected.
    blob = wrap_key(SharedKey.generate().to_bytes(), alice.public)
    with pytest.raises(DecryptionError):
        unwrap_key(_flip(blob, 31, 0x80), alice)


@pytest.mark.parametrize("keep", [0, 1, 32, 59, 91])
def test_truncated_wrapped_key_fails(alice: ClientKeyPair, keep: int) -> None:
    blob = wrap_key(SharedKey.generate().to_bytes(), alice.public)
    with pytest.raises(DecryptionError):
        unwrap_key(blob[:keep], alice)


def test_wrapped_key_with_low_order_ephemeral_fails(alice: ClientKeyPair) -> None:
    blob = wrap_key(SharedKey.generate().to_bytes(), alice.public)
    with pytest.raises(DecryptionError):
        unwrap_key(bytes(32) + blob[32:], alice)


def test_unwrap_with_other_info_fails(alice: ClientKeyPair) -> None:
    blob = wrap_key(b"s" * 32, alice.public, info=b"round-1")
    assert unwrap_key(blob, alice, info=b"round-1") == b"s" * 32
    with pytest.raises(DecryptionError):
        unwrap_key(blob, alice)


def test_wrap_argument_types_are_checked(alice: ClientKeyPair) -> None:
    with pytest.raises(TypeError, match="recipient must be a PublicKey"):
        wrap_key(b"s" * 32, alice.public.to_bytes())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keypair must be a ClientKeyPair"):
        unwrap_key(b"\x00" * 92, alice.public)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="secret must be bytes"):
        wrap_key(SharedKey.generate(), alice.public)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        wrap_key(b"", alice.public)


def test_wrapped_key_follows_the_documented_format(alice: ClientKeyPair) -> None:
    # Oracle: ephemeral (32) ‖ nonce (12) ‖ AES-256-GCM under HKDF-SHA256(dh, info ‖ eph ‖ recipient).
    secret = b"\x42" * 32
    blob = wrap_key(secret, alice.public)
    eph, nonce, body = blob[:32], blob[32:44], blob[44:]
    private = X25519PrivateKey.from_private_bytes(alice.private_bytes())
    dh = private.exchange(X25519PublicKey.from_public_bytes(eph))
    info = b"fedgraphrec/wrap" + eph + alice.public.to_bytes()
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(dh)
    assert AESGCM(key).decrypt(nonce, body, b"") == secret


def test_decryption_error_message_does_not_leak(alice: ClientKeyPair, bob: ClientKeyPair) -> None:
    s = SharedKey.generate()
    blob = wrap_key(s.to_bytes(), alice.public)
    with pytest.raises(DecryptionError) as info:
        unwrap_key(blob, bob)
    message = str(info.value)
    for secret in (s.to_bytes(), bob.private_bytes(), alice.private_bytes()):
        assert secret.hex() not in message
    assert "authentication" in message
    assert isinstance(info.value, CryptoError) and isinstance(info.value, ValueError)


# --- sealed messages (verification answers) ---------------------------------------------------------


def test_seal_open_round_trip_with_aad(alice: ClientKeyPair) -> None:
    for plaintext in (b"", b"\x01", b"virtual? no", bytes(range(256)) * 4):
        blob = seal(plaintext, alice.public, aad=b"item-token|round-3")
        assert len(blob) == sealed_size(len(plaintext)) == len(plaintext) + SEAL_OVERHEAD_BYTES
        assert open_sealed(blob, alice, aad=b"item-token|round-3") == plaintext


def test_seal_is_randomized(alice: ClientKeyPair) -> None:
    assert seal(b"\x01", alice.public) != seal(b"\x01", alice.public)


def test_sealed_answer_for_wrong_recipient_fails(alice: ClientKeyPair, bob: ClientKeyPair) -> None:
    with pytest.raises(DecryptionError):
        open_sealed(seal(b"\x00", alice.public), bob)


def test_sealed_answer_with_wrong_aad_fails(alice: ClientKeyPair) -> None:
    blob = seal(b"\x00", alice.public, aad=b"item-7")
    with pytest.raises(DecryptionError):
        open_sealed(blob, alice, aad=b"item-8")
    with pytest.raises(DecryptionError):
        open_sealed(blob, alice)


def test_every_flipped_byte_of_a_sealed_answer_fails(alice: ClientKeyPair) -> None:
    blob = seal(b"is virtual: 0", alice.public, aad=b"ctx")
    for position in range(0, len(blob), 3):
        with pytest.raises(DecryptionError):
            open_sealed(_flip(blob, position, 0x80), alice, aad=b"ctx")


def test_sealed_messages_and_wrapped_keys_are_domain_separated(alice: ClientKeyPair) -> None:
    with pytest.raises(DecryptionError):
        unwrap_key(seal(b"k" * 32, alice.public), alice)
    with pytest.raises(DecryptionError):
        open_sealed(wrap_key(b"k" * 32, alice.public), alice)


def test_sealed_size_rejects_negative() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        sealed_size(-1)


# --- Algorithm 2 end to end --------------------------------------------------------------------------


def test_algorithm2_key_setup_gives_every_client_the_same_s() -> None:
    clients = [ClientKeyPair.generate() for _ in range(5)]
    # lines 1-5: public keys travel as bytes through the server
    public_wire = [c.public.to_bytes() for c in clients]
    # line 6: the chosen client u_c generates S and wraps it for everybody
    s = SharedKey.generate()
    wrapped = [wrap_key(s.to_bytes(), PublicKey.from_bytes(pb)) for pb in public_wire]
    assert all(s.to_bytes() not in blob for blob in wrapped)
    # lines 7-8: each client unwraps its own copy
    recovered = [SharedKey.from_bytes(unwrap_key(blob, c)) for blob, c in zip(wrapped, clients, strict=True)]
    assert all(r == s for r in recovered)
    # lines 12-14: every client tokenizes item 42 identically
    assert len({ItemTokenizer(r).token(42) for r in recovered}) == 1
    # a client cannot open another client's copy
    with pytest.raises(DecryptionError):
        unwrap_key(wrapped[0], clients[1])
