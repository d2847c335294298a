"""Exceptions raised by :mod:`fedgraphrec.crypto`.

Argument problems use the standard types (``TypeError`` for a wrong type, ``ValueError`` for wrong
key material or an out-of-range value). A ciphertext that fails authentication raises
:class:`DecryptionError`. No message ever contains key bytes or plaintext.
"""

from __future__ import annotations

__all__ = ["CryptoError", "DecryptionError", "IntegrityError"]


class CryptoError(Exception):
    """Base class of the errors specific to :mod:`fedgraphrec.crypto`."""


class IntegrityError(CryptoError, ValueError):
    """A received message was rejected: tampered, replayed, re-routed or missing.

    Raised by a receiver when a protected message fails authentication, is bound (through its
    associated data) to another protocol, phase, step, sender or receiver than the one the receiver
    expects, or when a message the protocol prescribes never arrived. An active server is the usual
    cause; the protocol stops (or drops the message, where it says so). The message names the phase
    and the parties, never key bytes or plaintext.
    """


class DecryptionError(IntegrityError):
    """A ciphertext failed authentication and was not decrypted.

    Raised when the ciphertext or its nonce was modified or truncated, when it was encrypted under a
    different key (or for a different recipient), or when the associated data differs from what was
    used at encryption. The causes are cryptographically indistinguishable, so the message names all
    of them. It is a :class:`ValueError` so callers that validate inputs generically still catch it.
    """

    def __init__(self, what: str = "ciphertext") -> None:
        super().__init__(
            f"{what} failed authentication: it was modified or truncated, encrypted under a different "
            "key (or for a different recipient), or bound to different associated data"
        )
