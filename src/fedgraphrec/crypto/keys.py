"""Client key pairs, the shared symmetric key S, key wrapping and one-shot public-key encryption.

LP-GCN (spec ``lpgcn.md`` §3, Algorithm 2) uses hybrid encryption:

1. every client ``u`` generates a key pair ``(PR_u, PB_u)`` (:meth:`ClientKeyPair.generate`) and sends
   ``PB_u`` (:meth:`PublicKey.to_bytes`) to the server;
2. one client generates the shared key ``S`` (:meth:`SharedKey.generate`) and wraps it for every
   client, ``PB_u(S)`` (:func:`wrap_key`); client ``u`` recovers ``S`` with :func:`unwrap_key`;
3. ``S`` keys the item-ID tokens and payload encryption through purpose-bound sub-keys
   (:meth:`SharedKey.subkey`);
4. verification answers are encrypted for the asking convolution-client's public key
   ``PB_ũ`` (:func:`seal` / :func:`open_sealed`).

The public-key encryption is ECIES-style: an ephemeral X25519 key pair (RFC 7748), HKDF-SHA256
(RFC 5869) over the Diffie-Hellman output with the ephemeral and recipient public keys bound into
the derivation, then AES-256-GCM. The sealed format is::

    ephemeral public key (32) ‖ nonce (12) ‖ ciphertext (len(plaintext)) ‖ tag (16)

so the overhead is :data:`SEAL_OVERHEAD_BYTES` = 60 bytes and a wrapped 32-byte key is 92 bytes.
All primitives come from the pyca ``cryptography`` package.
"""

from __future__ import annotations

import hmac
import secrets
from functools import cache

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedgraphrec.crypto._primitives import (
    KEY_BYTES,
    NONCE_BYTES,
    TAG_BYTES,
    as_bytes,
    fingerprint,
    gcm_decrypt,
    gcm_encrypt,
)
from fedgraphrec.crypto.errors import DecryptionError

__all__ = [
    "PUBLIC_KEY_BYTES",
    "SEAL_OVERHEAD_BYTES",
    "SHARED_KEY_BYTES",
    "ClientKeyPair",
    "PublicKey",
    "SharedKey",
    "open_sealed",
    "seal",
    "sealed_size",
    "unwrap_key",
    "wrap_key",
]

PUBLIC_KEY_BYTES = 32
"""Length of an X25519 public key on the wire."""
SHARED_KEY_BYTES = KEY_BYTES
"""Length of the shared symmetric key S (256 bits)."""
SEAL_OVERHEAD_BYTES = PUBLIC_KEY_BYTES + NONCE_BYTES + TAG_BYTES
"""Bytes that :func:`seal` and :func:`wrap_key` add to the plaintext (60)."""

_WRAP_INFO = b"fedgraphrec/wrap"
_SEAL_INFO = b"fedgraphrec/seal"
_SUBKEY_INFO = b"fedgraphrec/subkey/v1/"


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
