"""One-shot public-key encryption (ECIES over X25519): :func:`seal` / :func:`open_sealed` and key wrapping.

LP-GCN (spec ``lpgcn.md`` §3, Algorithm 2) delivers the shared key ``S`` to every client wrapped for
its public key, ``PB_u(S)`` (:func:`wrap_key` / :func:`unwrap_key`), and encrypts verification
answers for the asking convolution-client's public key ``PB_ũ`` (:func:`seal` / :func:`open_sealed`).
Both are one construction under two derivation labels, kept here apart from the keys
(:mod:`~fedgraphrec.crypto.agreement`) they encrypt to; :mod:`~fedgraphrec.crypto.keys` re-exports
every public name for existing callers.

The construction: an ephemeral X25519 key pair (RFC 7748), HKDF-SHA256 (RFC 5869) over the
Diffie-Hellman output with the ephemeral and recipient public keys bound into the derivation, then
AES-256-GCM. The sealed format is::

    ephemeral public key (32) ‖ nonce (12) ‖ ciphertext (len(plaintext)) ‖ tag (16)

so the overhead is :data:`SEAL_OVERHEAD_BYTES` = 60 bytes and a wrapped 32-byte key is 92 bytes.
All primitives come from the pyca ``cryptography`` package.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedgraphrec.crypto._primitives import (
    KEY_BYTES,
    NONCE_BYTES,
    TAG_BYTES,
    as_bytes,
    gcm_decrypt,
    gcm_encrypt,
)
from fedgraphrec.crypto.agreement import PUBLIC_KEY_BYTES, ClientKeyPair, PublicKey
from fedgraphrec.crypto.errors import DecryptionError

__all__ = ["SEAL_OVERHEAD_BYTES", "open_sealed", "seal", "sealed_size", "unwrap_key", "wrap_key"]

SEAL_OVERHEAD_BYTES = PUBLIC_KEY_BYTES + NONCE_BYTES + TAG_BYTES
"""Bytes that :func:`seal` and :func:`wrap_key` add to the plaintext (60)."""

_WRAP_INFO = b"fedgraphrec/wrap"
_SEAL_INFO = b"fedgraphrec/seal"


def sealed_size(plaintext_bytes: int) -> int:
    """Exact length of :func:`seal` / :func:`wrap_key` output for a plaintext of this many bytes.

    Raises:
        ValueError: ``plaintext_bytes`` is negative.
    """
    if plaintext_bytes < 0:
        raise ValueError(f"plaintext_bytes must be non-negative, got {plaintext_bytes}")
    return plaintext_bytes + SEAL_OVERHEAD_BYTES


def _ecies_key(shared_secret: bytes, ephemeral: bytes, recipient: bytes, info: bytes) -> AESGCM:
    # Binding both public keys (as raw bytes) makes every distinct ephemeral encoding derive a
    # distinct key, so a ciphertext cannot be re-targeted or malleated through its header.
    hkdf = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info + ephemeral + recipient)
    return AESGCM(hkdf.derive(shared_secret))


def _check_info(info: object) -> bytes:
    return as_bytes(info, "info")


def _ecies_seal(plaintext: bytes, recipient: PublicKey, info: bytes, aad: bytes) -> bytes:
    if not isinstance(recipient, PublicKey):
        raise TypeError(f"recipient must be a PublicKey, got {type(recipient).__name__}")
    ephemeral = X25519PrivateKey.generate()
    ephemeral_raw = ephemeral.public_key().public_bytes_raw()
    shared_secret = ephemeral.exchange(recipient._key)
    aead = _ecies_key(shared_secret, ephemeral_raw, recipient.to_bytes(), info)
    return ephemeral_raw + gcm_encrypt(aead, plaintext, aad)


def _ecies_open(blob: bytes, keypair: ClientKeyPair, info: bytes, aad: bytes, what: str) -> bytes:
    if not isinstance(keypair, ClientKeyPair):
        raise TypeError(f"keypair must be a ClientKeyPair, got {type(keypair).__name__}")
    if len(blob) < SEAL_OVERHEAD_BYTES:
        raise DecryptionError(what)
    ephemeral_raw = blob[:PUBLIC_KEY_BYTES]
    try:
        shared_secret = keypair._exchange(ephemeral_raw)
    except ValueError:  # low-order ephemeral key: never produced by an honest sender
        raise DecryptionError(what) from None
    aead = _ecies_key(shared_secret, ephemeral_raw, keypair.public.to_bytes(), info)
    return gcm_decrypt(aead, blob[PUBLIC_KEY_BYTES:], aad, what)


def wrap_key(secret: bytes, recipient: PublicKey, *, info: bytes = _WRAP_INFO) -> bytes:
    """Encrypt a symmetric key for one recipient: ``PB_u(S)`` of LP-GCN Algorithm 2, line 6.

    ECIES over X25519 / HKDF-SHA256 / AES-256-GCM (module docstring). Only the holder of the
    recipient's private key can recover ``secret``: ``unwrap_key(wrap_key(s, kp.public), kp) == s``.
    Wrapping is randomized (fresh ephemeral key per call), so wrapping the same ``S`` for many
    clients reveals nothing linking the outputs. Output length is ``len(secret) + 60``
    (92 bytes for a 32-byte key).

    Args:
        secret: the key bytes, e.g. ``shared_key.to_bytes()``.
        recipient: the recipient's public key ``PB_u``.
        info: domain-separation label bound into the key derivation; :func:`unwrap_key` must be
            given the same one (default: ``b"fedgraphrec/wrap"``).

    Returns:
        ``ephemeral public (32) ‖ nonce (12) ‖ ciphertext ‖ tag (16)``.

    Raises:
        TypeError: ``secret`` or ``info`` is not bytes-like, or ``recipient`` is not a
            :class:`PublicKey`.
        ValueError: ``secret`` is empty.
    """
    raw = as_bytes(secret, "secret")
    if not raw:
        raise ValueError("secret to wrap must be non-empty")
    return _ecies_seal(raw, recipient, _check_info(info), b"")


def unwrap_key(blob: bytes, keypair: ClientKeyPair, *, info: bytes = _WRAP_INFO) -> bytes:
    """Recover a key wrapped by :func:`wrap_key` (LP-GCN Algorithm 2, line 8).

    Args:
        blob: the output of :func:`wrap_key`.
        keypair: the recipient's key pair.
        info: the label given to :func:`wrap_key` (default: ``b"fedgraphrec/wrap"``).

    Returns:
        The wrapped key bytes; pass them to :meth:`SharedKey.from_bytes`.

    Raises:
        TypeError: ``blob`` or ``info`` is not bytes-like, or ``keypair`` is not a
            :class:`ClientKeyPair`.
        DecryptionError: ``blob`` was modified or truncated, was wrapped for another recipient, or
            under another ``info``.
    """
    return _ecies_open(as_bytes(blob, "wrapped key"), keypair, _check_info(info), b"", "wrapped key")


def seal(plaintext: bytes, recipient: PublicKey, aad: bytes = b"") -> bytes:
    """One-shot public-key encryption, e.g. an LP-GCN verification answer for ``PB_ũ``.

    Same construction as :func:`wrap_key` under a separate derivation label, so sealed messages
    and wrapped keys cannot be swapped for one another. Confidential and authenticated to the
    recipient only: the sender is anonymous (anyone holding ``PB_ũ`` can seal), so bind the
    context the answer belongs to (asking client, item token, round) through ``aad``.
    ``open_sealed(seal(m, kp.public, a), kp, a) == m``; randomized; output length is
    ``len(plaintext) + 60``.

    Args:
        plaintext: the message (may be empty).
        recipient: the public key of the only party that can open the result.
        aad: associated data authenticated but not encrypted; not part of the output, so the
            recipient must supply the same bytes to :func:`open_sealed` (default: empty).

    Returns:
        ``ephemeral public (32) ‖ nonce (12) ‖ ciphertext ‖ tag (16)``.

    Raises:
        TypeError: ``plaintext`` or ``aad`` is not bytes-like, or ``recipient`` is not a
            :class:`PublicKey`.
    """
    return _ecies_seal(as_bytes(plaintext, "plaintext"), recipient, _SEAL_INFO, as_bytes(aad, "aad"))


def open_sealed(blob: bytes, keypair: ClientKeyPair, aad: bytes = b"") -> bytes:
    """Decrypt the output of :func:`seal` with the recipient's key pair.

    Args:
        blob: the output of :func:`seal`.
        keypair: the recipient's key pair.
        aad: the associated data given to :func:`seal` (default: empty).

    Raises:
        TypeError: ``blob`` or ``aad`` is not bytes-like, or ``keypair`` is not a
            :class:`ClientKeyPair`.
        DecryptionError: ``blob`` was modified or truncated, sealed for another recipient, or
            ``aad`` differs.
    """
    return _ecies_open(
        as_bytes(blob, "sealed message"), keypair, _SEAL_INFO, as_bytes(aad, "aad"), "sealed message"
    )
