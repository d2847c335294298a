"""Internal helpers shared by the crypto modules: AES-256-GCM framing and input checks.

Everything cryptographic here is delegated to the pyca ``cryptography`` package; this module only
fixes the wire framing ``nonce (12) ‖ ciphertext ‖ tag (16)`` and turns library exceptions into
:class:`~fedgraphrec.crypto.errors.DecryptionError`.
"""

from __future__ import annotations

import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedgraphrec.crypto.errors import DecryptionError

__all__ = [
    "KEY_BYTES",
    "NONCE_BYTES",
    "TAG_BYTES",
    "as_bytes",
    "fingerprint",
    "gcm_decrypt",
    "gcm_encrypt",
]

KEY_BYTES = 32
"""Length of every symmetric key (AES-256, HKDF-SHA256 output)."""
NONCE_BYTES = 12
"""Length of an AES-GCM nonce (96 bits, the size GCM is specified for)."""
TAG_BYTES = 16
"""Length of an AES-GCM authentication tag (128 bits, full length)."""


def as_bytes(value: object, name: str) -> bytes:
    """``value`` as :class:`bytes` if it is bytes-like, else a :class:`TypeError` naming ``name``."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{name} must be bytes, got {type(value).__name__}")


def fingerprint(public_data: bytes) -> str:
    """Short public identifier of ``public_data``: the first 8 hex digits of its SHA-256.

    Only ever applied to public material (public keys); secrets are never fingerprinted.
    """
    return hashlib.sha256(public_data).hexdigest()[:8]


def gcm_encrypt(aead: AESGCM, plaintext: bytes, aad: bytes) -> bytes:
    """``nonce ‖ AES-GCM(plaintext, aad)`` with a fresh random 96-bit nonce from ``os.urandom``."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + aead.encrypt(nonce, plaintext, aad)


def gcm_decrypt(aead: AESGCM, blob: bytes, aad: bytes, what: str) -> bytes:
    """Inverse of :func:`gcm_encrypt`.

    Raises:
        DecryptionError: ``blob`` is too short or fails authentication under ``aead`` and ``aad``.
    """
    if len(blob) < NONCE_BYTES + TAG_BYTES:
        raise DecryptionError(what)
    try:
        return aead.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
    except InvalidTag:
        raise DecryptionError(what) from None
