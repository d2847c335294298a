"""X25519 key agreement: a client's key pair :class:`ClientKeyPair` and its public half :class:`PublicKey`.

Every client of LP-GCN (spec ``lpgcn.md`` §3, Algorithm 2) and of secure aggregation holds X25519 key
pairs (RFC 7748). This module holds the keys themselves and :meth:`ClientKeyPair.agree`, the
HKDF-SHA256-derived secret two key pairs share; the public-key encryption built on them
(:mod:`~fedgraphrec.crypto.ecies`) and the group key ``S`` (:mod:`~fedgraphrec.crypto.keys`) live
apart, since neither is needed to agree a key. :mod:`~fedgraphrec.crypto.keys` re-exports both
classes and :data:`PUBLIC_KEY_BYTES` for existing callers.
"""

from __future__ import annotations

from functools import cache

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedgraphrec.crypto._primitives import KEY_BYTES, as_bytes, fingerprint

__all__ = ["PUBLIC_KEY_BYTES", "ClientKeyPair", "PublicKey"]

PUBLIC_KEY_BYTES = 32
"""Length of an X25519 public key on the wire."""


@cache
def _probe_key() -> X25519PrivateKey:
    """A process-local key used only to test public keys for low order; its outputs are discarded."""
    return X25519PrivateKey.generate()


class PublicKey:
    """An X25519 public key ``PB_u``: public, safe to send to the server and to log.

    Construct with :meth:`from_bytes` (or :meth:`ClientKeyPair.public`). The ``repr`` shows only an
    8-hex-digit SHA-256 fingerprint. Keys compare equal iff their 32-byte encodings are equal.

    Args:
        data: the 32-byte encoding (RFC 7748 little-endian u-coordinate).

    Raises:
        TypeError: ``data`` is not bytes-like.
        ValueError: ``data`` is not 32 bytes, has bit 255 set (a non-canonical encoding no honest
            X25519 implementation produces), or encodes a low-order point (whose Diffie-Hellman
            output is all-zero, independent of the private key).
    """

    __slots__ = ("_key", "_raw")

    def __init__(self, data: bytes) -> None:
        raw = as_bytes(data, "public key")
        if len(raw) != PUBLIC_KEY_BYTES:
            raise ValueError(f"an X25519 public key must be exactly {PUBLIC_KEY_BYTES} bytes, got {len(raw)}")
        if raw[-1] & 0x80:
            raise ValueError("not a canonical X25519 public key: bit 255 of the encoding is set")
        key = X25519PublicKey.from_public_bytes(raw)
        try:
            _probe_key().exchange(key)
        except ValueError:
            raise ValueError(
                "X25519 public key is a low-order point: it would give an all-zero shared secret"
            ) from None
        self._raw = raw
        self._key = key

    @classmethod
    def from_bytes(cls, data: bytes) -> PublicKey:
        """Parse and validate a 32-byte public key (see the class docstring for ``Raises``)."""
        return cls(data)

    def to_bytes(self) -> bytes:
        """The 32-byte encoding, as sent to the server."""
        return self._raw

    @property
    def fingerprint(self) -> str:
        """First 8 hex digits of SHA-256 of the encoding, for logs and ``repr``."""
        return fingerprint(self._raw)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PublicKey):
            return NotImplemented
        return self._raw == other._raw

    def __hash__(self) -> int:
        return hash(self._raw)

    def __repr__(self) -> str:
        return f"<PublicKey x25519:{self.fingerprint}>"


class ClientKeyPair:
    """A client's X25519 key pair ``(PR_u, PB_u)``.

    The private half never leaves the object except through :meth:`private_bytes` (for
    checkpointing). The ``repr`` shows only the public key's fingerprint.

    Args:
        private_key: a pyca :class:`~cryptography.hazmat.primitives.asymmetric.x25519.X25519PrivateKey`;
            most callers want :meth:`generate` instead.

    Raises:
        TypeError: ``private_key`` is not an X25519 private key.
    """

    __slots__ = ("_private", "_public")

    def __init__(self, private_key: X25519PrivateKey) -> None:
        if not isinstance(private_key, X25519PrivateKey):
            raise TypeError(f"private_key must be an X25519PrivateKey, got {type(private_key).__name__}")
        self._private = private_key
        self._public = PublicKey(private_key.public_key().public_bytes_raw())

    @classmethod
    def generate(cls) -> ClientKeyPair:
        """A fresh key pair from the operating system's CSPRNG."""
        return cls(X25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, data: bytes) -> ClientKeyPair:
        """Restore a key pair from :meth:`private_bytes`.

        Raises:
            TypeError: ``data`` is not bytes-like.
            ValueError: ``data`` is not 32 bytes.
        """
        raw = as_bytes(data, "private key")
        if len(raw) != KEY_BYTES:
            raise ValueError(f"an X25519 private key must be exactly {KEY_BYTES} bytes, got {len(raw)}")
        return cls(X25519PrivateKey.from_private_bytes(raw))

    @property
    def public(self) -> PublicKey:
        """The public half ``PB_u``."""
        return self._public

    def private_bytes(self) -> bytes:
        """The 32-byte private key. Secret: store it only where the client's own state is kept."""
        return self._private.private_bytes_raw()

    def agree(self, peer: PublicKey, info: bytes) -> bytes:
        """A 32-byte secret shared with ``peer``: HKDF-SHA256 of the X25519 output, bound to ``info``.

        ``a.agree(b.public, i) == b.agree(a.public, i)``; callers make ``info`` symmetric in the two
        parties (e.g. both public keys in a fixed order) and give every purpose its own ``info``.

        Raises:
            TypeError: ``peer`` is not a :class:`PublicKey` or ``info`` is not bytes-like.
            ValueError: the exchange gives the all-zero output (a low-order ``peer`` key).
        """
        if not isinstance(peer, PublicKey):
            raise TypeError(f"peer must be a PublicKey, got {type(peer).__name__}")
        context = as_bytes(info, "info")
        raw = self._exchange(peer.to_bytes())
        return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=context).derive(raw)

    def _exchange(self, peer: bytes) -> bytes:
        """Raw X25519 output with ``peer``; ``ValueError`` if the result is all-zero (low order)."""
        return self._private.exchange(X25519PublicKey.from_public_bytes(peer))

    def __repr__(self) -> str:
        return f"<ClientKeyPair x25519 public={self._public.fingerprint}>"
