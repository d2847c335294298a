"""The shared symmetric key S of LP-GCN (:class:`SharedKey`), and the key names of the crypto layer.

LP-GCN (spec ``lpgcn.md`` §3, Algorithm 2) uses hybrid encryption:

1. every client ``u`` generates a key pair ``(PR_u, PB_u)`` (:meth:`ClientKeyPair.generate`) and sends
   ``PB_u`` (:meth:`PublicKey.to_bytes`) to the server;
2. one client generates the shared key ``S`` (:meth:`SharedKey.generate`) and wraps it for every
   client, ``PB_u(S)`` (:func:`wrap_key`); client ``u`` recovers ``S`` with :func:`unwrap_key`;
3. ``S`` keys the item-ID tokens and payload encryption through purpose-bound sub-keys
   (:meth:`SharedKey.subkey`);
4. verification answers are encrypted for the asking convolution-client's public key
   ``PB_ũ`` (:func:`seal` / :func:`open_sealed`).

This module holds ``S`` (:class:`SharedKey`). The key pairs of step 1 live in
:mod:`~fedgraphrec.crypto.agreement` (X25519 key agreement) and the public-key encryption of steps 2
and 4 in :mod:`~fedgraphrec.crypto.ecies` (format and overhead there); both are re-exported here, so
``fedgraphrec.crypto.keys`` still names every key-handling function.
"""

from __future__ import annotations

import hmac
import secrets

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedgraphrec.crypto._primitives import KEY_BYTES, as_bytes

__all__ = ["SHARED_KEY_BYTES", "SharedKey"]

SHARED_KEY_BYTES = KEY_BYTES
"""Length of the shared symmetric key S (256 bits)."""

_SUBKEY_INFO = b"fedgraphrec/subkey/v1/"


class SharedKey:
    """The shared symmetric key ``S`` of LP-GCN: 256 uniformly random bits, known to all clients.

    ``S`` itself keys nothing directly. Each use derives its own key with :meth:`subkey`
    (``"item-token"`` for :class:`~fedgraphrec.crypto.tokens.ItemTokenizer`, ``"embedding"`` for
    :class:`~fedgraphrec.crypto.aead.PayloadCipher`), so using ``S`` for several purposes does not
    let one purpose's outputs be replayed as another's. The ``repr`` never shows key bytes; equality
    is compared in constant time. Instances are unhashable.

    Args:
        data: the 32 key bytes; most callers want :meth:`generate` or :meth:`from_bytes`.

    Raises:
        TypeError: ``data`` is not bytes-like.
        ValueError: ``data`` is not 32 bytes, or is all zero (almost certainly a bug, not a key).
    """

    __slots__ = ("_key",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, data: bytes) -> None:
        raw = as_bytes(data, "shared key")
        if len(raw) != SHARED_KEY_BYTES:
            raise ValueError(f"the shared key must be exactly {SHARED_KEY_BYTES} bytes, got {len(raw)}")
        if not any(raw):
            raise ValueError("the shared key is all zero bytes; use SharedKey.generate()")
        self._key = raw

    @classmethod
    def generate(cls) -> SharedKey:
        """A fresh key from :func:`secrets.token_bytes` (the operating system's CSPRNG)."""
        return cls(secrets.token_bytes(SHARED_KEY_BYTES))

    @classmethod
    def from_bytes(cls, data: bytes) -> SharedKey:
        """Rebuild a key from :meth:`to_bytes` output, e.g. after :func:`unwrap_key`."""
        return cls(data)

    def to_bytes(self) -> bytes:
        """The 32 key bytes. Secret: only ever pass them to :func:`wrap_key` or the client's state."""
        return self._key

    def subkey(self, purpose: str) -> bytes:
        """A 32-byte key for one ``purpose``, derived as HKDF-SHA256(S, info=label ‖ purpose).

        HKDF-Expand is a PRF keyed by ``S`` (RFC 5869; Krawczyk, CRYPTO 2010, Theorem 2), so
        sub-keys for distinct purposes are computationally independent, and knowing one reveals
        nothing about ``S`` or the others.

        Args:
            purpose: a non-empty label, e.g. ``"item-token"`` or ``"embedding"``.

        Raises:
            TypeError: ``purpose`` is not a ``str``.
            ValueError: ``purpose`` is empty.
        """
        if not isinstance(purpose, str):
            raise TypeError(f"purpose must be a str, got {type(purpose).__name__}")
        if not purpose:
            raise ValueError("purpose must be a non-empty label such as 'item-token'")
        info = _SUBKEY_INFO + purpose.encode()
        hkdf = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info)
        return hkdf.derive(self._key)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SharedKey):
            return NotImplemented
        return hmac.compare_digest(self._key, other._key)

    def __repr__(self) -> str:
        return f"SharedKey(<{SHARED_KEY_BYTES} bytes hidden>)"
