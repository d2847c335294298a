"""Sealed messages: AEAD under a group key, bound to protocol, phase, step, sender and receiver.

The lossless horizontal protocols (LP-GCN, GNN4FR) move user rows, gradients and shares between
clients *through* the server, encrypted under the clients' shared key :math:`S`. Encryption alone
stops a curious server from reading them; it does not stop an active one from replaying last step's
ciphertext, handing client A's message to client C, or dropping a message. This module closes that
gap with one rule: every sealed message carries, as AES-GCM associated data, the canonical encoding
of its :class:`Binding` —

    ``fedgraphrec/v2 | protocol | phase | step | sender | receiver``

— and the receiver opens it with the binding *it expects* (its own name, the sender the protocol
routes to it, the current step). Any difference fails authentication and raises
:class:`~fedgraphrec.crypto.errors.IntegrityError` naming the phase and the parties; a missing
message raises the same error.

Party names are ``"role:id"`` (``"client:17"``, ``"conv-client:3"``) or ``"server"``. A message the
server fans out unchanged to several receivers (a user's embedding to all its neighbours) is bound to
the multicast receiver ``"role:*"``; each receiver then checks the *sender* against the routing it
knows from set-up, so a copy re-routed to a party that expects another sender fails, and a copy
delivered to another legitimate receiver of the same multicast carries the same content it would
have received anyway.

Key rotation: :class:`GroupChannel` seals step ``t`` under ``HKDF(S, "protocol/purpose/step=t")``
(:meth:`~fedgraphrec.crypto.keys.SharedKey.subkey`). With 96-bit random nonces AES-GCM must stay
below :math:`2^{32}` messages per key (NIST SP 800-38D §8.3); a fresh key per step keeps every key
far below that, and :data:`MAX_MESSAGES_PER_KEY` (:math:`2^{31}`) is enforced, with an error telling
the caller to shorten the step, rather than silently wearing a key out. Rotation also makes a replay
across steps fail twice over (wrong key and wrong associated data).

The count is per key for the whole run, not per :class:`GroupChannel` object: a channel charges a
:class:`KeyUsage`, which its owner keeps for as long as the node lives (the in-process endpoint keeps
one; a Flower SuperNode, which rebuilds its endpoint for every message, persists it in its state).
It counts what *this node* sealed; every node enforces the limit on its own messages.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedgraphrec.crypto._primitives import NONCE_BYTES, TAG_BYTES
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.keys import SharedKey

__all__ = [
    "AAD_VERSION",
    "MAX_MESSAGES_PER_KEY",
    "SERVER",
    "Binding",
    "GroupChannel",
    "KeyUsage",
    "multicast",
    "party",
    "party_names",
]

AAD_VERSION = b"fedgraphrec/v2"
"""Prefix of every associated-data string (changes if the encoding does)."""
MAX_MESSAGES_PER_KEY = 1 << 31
"""Messages one per-step key may seal: half the SP 800-38D bound for random 96-bit nonces."""
SERVER = "server"
"""The relaying server's party name."""
_SEP = b"|"


def party(role: str, ident: int) -> str:
    """The party name ``"role:id"`` (e.g. ``party("client", 3) == "client:3"``)."""
    return f"{role}:{int(ident)}"


def party_names(role: str, ids: Sequence[int]) -> list[str]:
    """:func:`party` for every id (vectorised over a list)."""
    prefix = f"{role}:"
    return [prefix + str(int(i)) for i in ids]


def multicast(role: str) -> str:
    """The receiver name of a message the server fans out unchanged to parties of ``role``."""
    return f"{role}:*"


@dataclass(frozen=True)
class Binding:
    """Where a sealed message belongs: protocol, phase and step (sender and receiver per message)."""

    protocol: str
    phase: str
    step: int

    def prefix(self) -> bytes:
        """The associated-data bytes common to every message of this phase and step."""
        return _SEP.join(
            (AAD_VERSION, self.protocol.encode(), self.phase.encode(), str(self.step).encode(), b"")
        )

    def aad(self, sender: str, receiver: str) -> bytes:
        """The associated data of one message from ``sender`` to ``receiver``."""
        return self.prefix() + sender.encode() + _SEP + receiver.encode()

    def aads(self, senders: Sequence[str], receivers: Sequence[str]) -> list[bytes]:
        """:meth:`aad` for every (sender, receiver) pair, in order."""
        p = self.prefix()
        return [p + s.encode() + _SEP + r.encode() for s, r in zip(senders, receivers, strict=True)]


@dataclass
class KeyUsage:
    """Messages this node sealed under the current per-step key, kept across channels for the run.

    Keys never return to an earlier step (a node refuses to go back), so only the latest step's
    count is kept. ``step``/``sealed`` are plain ints, so an engine can persist them between messages.
    """

    step: int = -(1 << 62)
    sealed: int = 0

    def charge(self, binding: Binding, count: int) -> None:
        """Count ``count`` more messages under ``binding``'s step key.

        Raises:
            RuntimeError: the key would seal more than :data:`MAX_MESSAGES_PER_KEY` messages, or a
                message would be sealed under an earlier step's key (whose count was dropped).
        """
        if binding.step < self.step:
            raise RuntimeError(
                f"{binding.phase}: sealing under step {binding.step}'s key after step {self.step}; "
                "keys never return to an earlier step"
            )
        total = (self.sealed if binding.step == self.step else 0) + count
        if total > MAX_MESSAGES_PER_KEY:
            raise RuntimeError(
                f"{binding.phase}: step {binding.step} would seal {total} messages under one key, over the "
                f"AES-GCM random-nonce limit {MAX_MESSAGES_PER_KEY}; use smaller steps (minibatches)"
            )
        self.step, self.sealed = binding.step, total


class GroupChannel:
    """AES-256-GCM under per-step sub-keys of the clients' shared key :math:`S`.

    Every member of the group (all clients hold :math:`S`) can seal and open; the server, which
    relays, holds no key. Messages are framed ``nonce (12) ‖ ciphertext ‖ tag (16)``, exactly the
    size :func:`~fedgraphrec.crypto.aead.ciphertext_size` counts, so ``real`` and ``accounted``
    ledgers agree.

    Args:
        key: the shared key :math:`S`.
        protocol: protocol name, part of every sub-key's label (keys of two protocols never meet).
        purpose: sub-key purpose (default ``"payload"``).
        usage: the run's count of messages sealed per step key (default: a fresh one, this
            channel's own; an engine that rebuilds channels passes the one it keeps).
    """

    __slots__ = ("_cache", "_key", "_label", "usage")

    def __init__(
        self, key: SharedKey, protocol: str, purpose: str = "payload", usage: KeyUsage | None = None
    ) -> None:
        if not isinstance(key, SharedKey):
            raise TypeError(f"key must be a SharedKey, got {type(key).__name__}")
        self._key = key
        self._label = f"{protocol}/{purpose}"
        self._cache: tuple[int, AESGCM] | None = None
        self.usage = KeyUsage() if usage is None else usage

    def _aead(self, step: int) -> AESGCM:
        if self._cache is None or self._cache[0] != step:
            self._cache = (step, AESGCM(self._key.subkey(f"{self._label}/step={step}")))
        return self._cache[1]

    def seal(self, binding: Binding, plaintexts: Sequence[bytes], aads: Sequence[bytes]) -> list[bytes]:
        """Encrypt every plaintext with a fresh random nonce, binding its associated data.

        Raises:
            RuntimeError: the step's key would seal more than :data:`MAX_MESSAGES_PER_KEY` messages.
        """
        if len(plaintexts) != len(aads):
            raise ValueError(f"{binding.phase}: {len(plaintexts)} plaintexts but {len(aads)} bindings")
        self.usage.charge(binding, len(plaintexts))
        enc = self._aead(binding.step).encrypt
        nonces = _random_nonces(len(plaintexts))
        return [
            nonces[k : k + NONCE_BYTES] + enc(nonces[k : k + NONCE_BYTES], p, a)
            for k, p, a in zip(range(0, len(nonces), NONCE_BYTES), plaintexts, aads, strict=True)
        ]

    def seal_into(self, binding: Binding, plaintext: bytes, aad: bytes) -> bytearray:
        """:meth:`seal` of one plaintext, framed in one fresh buffer the cipher writes into.

        The same ``nonce ‖ ciphertext ‖ tag`` as :meth:`seal`, without joining the nonce to the
        cipher's output afterwards: one pass less over a batched part's bytes (issue #33).
        """
        self.usage.charge(binding, 1)
        blob = bytearray(NONCE_BYTES + len(plaintext) + TAG_BYTES)
        nonce = _random_nonces(1)
        blob[:NONCE_BYTES] = nonce
        self._aead(binding.step).encrypt_into(nonce, plaintext, aad, memoryview(blob)[NONCE_BYTES:])
        return blob

    def open(
        self,
        binding: Binding,
        blobs: Sequence[bytes | bytearray | None],
        aads: Sequence[bytes],
        senders: Sequence[str],
        receivers: Sequence[str],
    ) -> list[bytes]:
        """Authenticate and decrypt every blob with the binding its receiver expects.

        Raises:
            IntegrityError: a blob is missing (``None``), malformed, or fails authentication; the
                message names the phase, the step, the expected sender and the receiver.
        """
        aead = self._aead(binding.step)
        out: list[bytes] = []
        for k, (blob, aad) in enumerate(zip(blobs, aads, strict=True)):
            nonce, body = _nonce_and_body(binding, blob, senders[k], receivers[k])
            try:
                out.append(aead.decrypt(nonce, body, aad))
            except InvalidTag:
                raise _forged(binding, senders[k], receivers[k]) from None
        return out

    def open_writable(
        self, binding: Binding, blob: bytes | bytearray | None, aad: bytes, sender: str, receiver: str
    ) -> bytearray:
        """:meth:`open` of one blob into a fresh ``bytearray``: a tensor may keep it as its memory."""
        nonce, body = _nonce_and_body(binding, blob, sender, receiver)
        plain = bytearray(len(body) - TAG_BYTES)
        try:
            self._aead(binding.step).decrypt_into(nonce, body, aad, plain)
        except InvalidTag:
            raise _forged(binding, sender, receiver) from None
        return plain

    def __repr__(self) -> str:
        return f"GroupChannel({self._label}, AES-256-GCM, per-step keys)"


def _random_nonces(count: int) -> bytes:
    return os.urandom(NONCE_BYTES * count)


def _nonce_and_body(
    binding: Binding, blob: bytes | bytearray | None, sender: str, receiver: str
) -> tuple[bytes, memoryview]:
    """A blob's nonce and ciphertext (a view, not a copy), or the rejection of a missing or short one."""
    if blob is None:
        raise IntegrityError(_rejected(binding, sender, receiver, "never arrived (dropped)"))
    if len(blob) < NONCE_BYTES + TAG_BYTES:
        raise IntegrityError(_rejected(binding, sender, receiver, "is truncated"))
    return bytes(blob[:NONCE_BYTES]), memoryview(blob)[NONCE_BYTES:]


def _forged(binding: Binding, sender: str, receiver: str) -> IntegrityError:
    what = "failed authentication (modified, replayed from another step, or re-routed)"
    return IntegrityError(_rejected(binding, sender, receiver, what))


def _rejected(binding: Binding, sender: str, receiver: str, what: str) -> str:
    return (
        f"{binding.protocol} {binding.phase} (step {binding.step}): the message from {sender} to {receiver} "
        f"{what}; the receiver rejected it"
    )
