"""Randomized authenticated encryption of payloads (user embeddings, answers) under the shared key S.

LP-GCN sends user embeddings ``S(e_u)`` through the server (spec ``lpgcn.md`` §3): the server must
neither read nor undetectably alter them. :class:`PayloadCipher` uses AES-256-GCM (NIST SP 800-38D)
keyed with ``S.subkey("embedding")``; each message is framed as::

    nonce (12) ‖ ciphertext (len(plaintext)) ‖ tag (16)

so the overhead is exactly ``NONCE_BYTES + TAG_BYTES`` = 28 bytes (:func:`ciphertext_size`). The
runtime's ``accounted`` crypto mode uses :func:`ciphertext_size` to count bytes without encrypting.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedgraphrec.crypto._primitives import NONCE_BYTES, TAG_BYTES, as_bytes, gcm_decrypt, gcm_encrypt
from fedgraphrec.crypto.errors import DecryptionError
from fedgraphrec.crypto.keys import SharedKey

__all__ = ["PayloadCipher", "ciphertext_size"]

_WHAT = "payload"


def ciphertext_size(plaintext_bytes: int) -> int:
    """Exact length of :meth:`PayloadCipher.encrypt` output for a plaintext of this many bytes.

    Equals ``NONCE_BYTES + plaintext_bytes + TAG_BYTES``.

    Raises:
        ValueError: ``plaintext_bytes`` is negative.
    """
    if plaintext_bytes < 0:
        raise ValueError(f"plaintext_bytes must be non-negative, got {plaintext_bytes}")
    return NONCE_BYTES + plaintext_bytes + TAG_BYTES


def _aads(aads: Sequence[bytes] | None, n: int) -> Sequence[bytes]:
    if aads is None:
        return [b""] * n
    if len(aads) != n:
        raise ValueError(f"got {n} messages but {len(aads)} associated-data entries; give one per message")
    return aads


class PayloadCipher:
    """AES-256-GCM under a sub-key of the shared key ``S``, with a fresh random nonce per message.

    Contract: ``decrypt(encrypt(m, a), a) == m``; any change to the ciphertext, nonce or tag, a
    different key, or a different ``a`` makes :meth:`decrypt` raise
    :class:`~fedgraphrec.crypto.errors.DecryptionError` (INT-CTXT). Encryption is randomized, so
    equal plaintexts give unrelated ciphertexts (IND-CPA); only the length is revealed.

    Nonces are 96 random bits, so keep the number of messages under one key below ``2^32``
    (SP 800-38D §8.3), bounding the nonce-collision probability by ``2^-32``; that is, e.g.,
    100 000 users × 3 layers × 10 000 iterations. Use ``aad`` to bind each ciphertext to its slot
    (sender, receiver, phase, layer, round): without it, the server could swap or replay two
    ciphertexts under the same ``S`` undetected.

    Args:
        shared_key: the shared key ``S``.
        purpose: the :meth:`~fedgraphrec.crypto.keys.SharedKey.subkey` label
            (default: ``"embedding"``); distinct purposes give independent keys.

    Raises:
        TypeError: ``shared_key`` is not a :class:`~fedgraphrec.crypto.keys.SharedKey`, or
            ``purpose`` is not a ``str``.
        ValueError: ``purpose`` is empty.
    """

    __slots__ = ("_aead",)

    def __init__(self, shared_key: SharedKey, *, purpose: str = "embedding") -> None:
        if not isinstance(shared_key, SharedKey):
            raise TypeError(f"shared_key must be a SharedKey, got {type(shared_key).__name__}")
        self._aead = AESGCM(shared_key.subkey(purpose))

    def encrypt(self, plaintext: bytes, aad: bytes = b"") -> bytes:
        """Encrypt and authenticate ``plaintext``, binding ``aad``.

        Args:
            plaintext: the payload (may be empty), e.g. ``embedding.tobytes()``.
            aad: associated data, authenticated but neither encrypted nor included in the output
                (default: empty).

        Returns:
            ``nonce (12) ‖ ciphertext ‖ tag (16)``, of length :func:`ciphertext_size`.

        Raises:
            TypeError: ``plaintext`` or ``aad`` is not bytes-like.
        """
        return gcm_encrypt(self._aead, as_bytes(plaintext, "plaintext"), as_bytes(aad, "aad"))

    def decrypt(self, blob: bytes, aad: bytes = b"") -> bytes:
        """Authenticate and decrypt the output of :meth:`encrypt`.

        Args:
            blob: the ciphertext.
            aad: the associated data given to :meth:`encrypt` (default: empty).

        Raises:
            TypeError: ``blob`` or ``aad`` is not bytes-like.
            DecryptionError: ``blob`` was modified or truncated, encrypted under another key, or
                ``aad`` differs.
        """
        return gcm_decrypt(self._aead, as_bytes(blob, "ciphertext"), as_bytes(aad, "aad"), _WHAT)

    def encrypt_many(self, plaintexts: Sequence[bytes], aads: Sequence[bytes] | None = None) -> list[bytes]:
        """:meth:`encrypt` each plaintext with its own nonce; ``aads[k]`` goes with ``plaintexts[k]``.

        Args:
            plaintexts: the payloads.
            aads: one associated-data entry per payload, or ``None`` for all empty (default).

        Raises:
            TypeError: an entry is not bytes-like.
            ValueError: ``aads`` has a different length from ``plaintexts``.
        """
        aad_list = _aads(aads, len(plaintexts))
        enc = self._aead.encrypt
        nonces = os.urandom(NONCE_BYTES * len(plaintexts))
        try:  # fast path: one tight loop over the native call, fresh random nonces
            return [
                nonces[k : k + NONCE_BYTES] + enc(nonces[k : k + NONCE_BYTES], p, a)
                for k, p, a in zip(range(0, len(nonces), NONCE_BYTES), plaintexts, aad_list, strict=True)
            ]
        except TypeError:  # a non-bytes entry: the checked path converts it or says which
            return [self.encrypt(p, a) for p, a in zip(plaintexts, aad_list, strict=True)]

    def decrypt_many(self, blobs: Sequence[bytes], aads: Sequence[bytes] | None = None) -> list[bytes]:
        """:meth:`decrypt` each ciphertext; fails on the first one that does not authenticate.

        Args:
            blobs: the ciphertexts.
            aads: one associated-data entry per ciphertext, or ``None`` for all empty (default).

        Raises:
            TypeError: an entry is not bytes-like.
            ValueError: ``aads`` has a different length from ``blobs``.
            DecryptionError: some ciphertext does not authenticate.
        """
        aad_list = _aads(aads, len(blobs))
        dec = self._aead.decrypt
        try:  # fast path: one tight loop over the native call
            return [dec(b[:NONCE_BYTES], b[NONCE_BYTES:], a) for b, a in zip(blobs, aad_list, strict=True)]
        except InvalidTag:
            raise DecryptionError(_WHAT) from None
        except (TypeError, ValueError):  # a non-bytes entry or a truncated blob: the checked path says which
            return [self.decrypt(b, a) for b, a in zip(blobs, aad_list, strict=True)]

    def __repr__(self) -> str:
        return "PayloadCipher(AES-256-GCM, <keyed by a hidden shared key>)"
