"""Randomized AEAD of payloads under S (LP-GCN §3: user embeddings S(e_u))."""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedgraphrec.crypto._primitives import NONCE_BYTES, TAG_BYTES
from fedgraphrec.crypto.aead import PayloadCipher, ciphertext_size
from fedgraphrec.crypto.errors import DecryptionError
from fedgraphrec.crypto.keys import SharedKey


@pytest.fixture(scope="module")
def key() -> SharedKey:
    return SharedKey.generate()


@pytest.fixture(scope="module")
def cipher(key: SharedKey) -> PayloadCipher:
    return PayloadCipher(key)


def _flip(blob: bytes, position: int) -> bytes:
    out = bytearray(blob)
    out[position] ^= 0x01
    return bytes(out)


def test_constants() -> None:
    assert (NONCE_BYTES, TAG_BYTES) == (12, 16)


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 64 * 8, 10_000])
def test_round_trip_and_exact_size(cipher: PayloadCipher, size: int) -> None:
    plaintext = bytes(np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8))
    blob = cipher.encrypt(plaintext, aad=b"layer-1")
    assert len(blob) == ciphertext_size(size) == size + 28
    assert cipher.decrypt(blob, aad=b"layer-1") == plaintext


def test_embedding_round_trip_is_bit_exact(cipher: PayloadCipher) -> None:
    embedding = np.random.default_rng(0).standard_normal(64)
    restored = np.frombuffer(cipher.decrypt(cipher.encrypt(embedding.tobytes())), dtype=np.float64)
    np.testing.assert_array_equal(restored, embedding)


def test_another_cipher_with_the_same_key_decrypts(key: SharedKey) -> None:
    blob = PayloadCipher(key).encrypt(b"payload")
    assert PayloadCipher(SharedKey.from_bytes(key.to_bytes())).decrypt(blob) == b"payload"


def test_encryption_is_randomized(cipher: PayloadCipher) -> None:
    blobs = {cipher.encrypt(b"same embedding") for _ in range(50)}
    assert len(blobs) == 50
    assert len({b[:NONCE_BYTES] for b in blobs}) == 50


def test_every_flipped_byte_fails(cipher: PayloadCipher) -> None:
    blob = cipher.encrypt(b"0123456789abcdef0123", aad=b"ctx")
    for position in range(len(blob)):  # nonce, ciphertext and tag
        with pytest.raises(DecryptionError):
            cipher.decrypt(_flip(blob, position), aad=b"ctx")


@pytest.mark.parametrize("keep", [0, NONCE_BYTES, NONCE_BYTES + TAG_BYTES - 1, NONCE_BYTES + TAG_BYTES])
def test_truncated_ciphertext_fails(cipher: PayloadCipher, keep: int) -> None:
    blob = cipher.encrypt(b"some payload")
    with pytest.raises(DecryptionError):
        cipher.decrypt(blob[:keep])


def test_wrong_aad_fails(cipher: PayloadCipher) -> None:
    blob = cipher.encrypt(b"e_u", aad=b"client-3|layer-0")
    with pytest.raises(DecryptionError):
        cipher.decrypt(blob, aad=b"client-4|layer-0")
    with pytest.raises(DecryptionError):
        cipher.decrypt(blob)


def test_wrong_key_fails(cipher: PayloadCipher) -> None:
    blob = cipher.encrypt(b"e_u")
    with pytest.raises(DecryptionError, match="different key"):
        PayloadCipher(SharedKey.generate()).decrypt(blob)


def test_purposes_give_independent_keys(key: SharedKey) -> None:
    blob = PayloadCipher(key, purpose="answer").encrypt(b"yes")
    assert PayloadCipher(key, purpose="answer").decrypt(blob) == b"yes"
    with pytest.raises(DecryptionError):
        PayloadCipher(key).decrypt(blob)


def test_ciphertext_follows_the_documented_format(key: SharedKey, cipher: PayloadCipher) -> None:
    blob = cipher.encrypt(b"payload", aad=b"a")
    assert AESGCM(key.subkey("embedding")).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], b"a") == b"payload"


def test_batch_helpers(cipher: PayloadCipher) -> None:
    plaintexts = [bytes([i]) * i for i in range(10)]
    aads = [f"user-{i}".encode() for i in range(10)]
    blobs = cipher.encrypt_many(plaintexts, aads)
    assert [len(b) for b in blobs] == [ciphertext_size(len(p)) for p in plaintexts]
    assert cipher.decrypt_many(blobs, aads) == plaintexts
    assert cipher.decrypt_many(cipher.encrypt_many(plaintexts)) == plaintexts
    assert cipher.encrypt_many([]) == [] and cipher.decrypt_many([]) == []


def test_batch_detects_a_swapped_slot(cipher: PayloadCipher) -> None:
    aads = [b"user-0", b"user-1"]
    blobs = cipher.encrypt_many([b"e_0", b"e_1"], aads)
    with pytest.raises(DecryptionError):
        cipher.decrypt_many(blobs[::-1], aads)


def test_batch_aad_count_must_match(cipher: PayloadCipher) -> None:
    with pytest.raises(ValueError, match="2 messages but 1 associated-data"):
        cipher.encrypt_many([b"a", b"b"], [b"x"])
    with pytest.raises(ValueError, match="1 messages but 2 associated-data"):
        cipher.decrypt_many([cipher.encrypt(b"a")], [b"x", b"y"])


def test_ciphertext_size_rejects_negative() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        ciphertext_size(-1)


def test_argument_types_are_checked(key: SharedKey, cipher: PayloadCipher) -> None:
    with pytest.raises(TypeError, match="plaintext must be bytes, got str"):
        cipher.encrypt("embedding")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="aad must be bytes"):
        cipher.encrypt(b"x", aad="ctx")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="shared_key must be a SharedKey"):
        PayloadCipher(key.to_bytes())  # type: ignore[arg-type]
    assert cipher.decrypt(cipher.encrypt(bytearray(b"ok"), aad=memoryview(b"a")), aad=b"a") == b"ok"  # type: ignore[arg-type]


def test_errors_and_repr_do_not_leak(key: SharedKey, cipher: PayloadCipher) -> None:
    plaintext = b"secret-embedding-bytes"
    blob = cipher.encrypt(plaintext)
    with pytest.raises(DecryptionError) as info:
        cipher.decrypt(_flip(blob, len(blob) - 1))
    message = str(info.value)
    for secret in (key.to_bytes().hex(), key.subkey("embedding").hex(), plaintext.hex()):
        assert secret not in message and secret not in repr(cipher)
    assert b"secret-embedding".decode() not in message
