"""Peer-to-peer messages for serverless protocols (DGREC): every party is a peer program.

A serverless protocol has no server program and no :class:`~fedgraphrec.runtime.transport.Transport`
round: each party is a :class:`Peer` that sends :class:`PeerMessage` objects straight to other peers.
:class:`PeerTransport` carries them in process with the same bookkeeping the server transport does:

* each message from peer ``u`` to peer ``v`` is booked once in the run's
  :class:`~fedgraphrec.runtime.ledger.Ledger` (phase, roles, bytes, per-client totals);
* with transcripts on, it is recorded in the receiving role's
  :class:`~fedgraphrec.runtime.transcript.Transcript` (what ``v`` got, with sender ids and sizes);
* a ``sealed`` message is sealed by the *sending* peer under the key of its link to the receiver
  (:meth:`Peer.link_key`), bound to protocol, phase, step, sender and receiver exactly as the
  server transport binds its messages (:mod:`~fedgraphrec.runtime.sealing`), and opened by the
  receiver with the binding *it* expects; in ``accounted`` mode the cipher is skipped and the ledger
  books the ciphertext size all the same, so both modes book identical bytes;
* an attached :class:`~fedgraphrec.runtime.network.Adversary` (an on-path attacker between peers)
  may alter sealed payloads before delivery, and the receiver then rejects them.

Node-side checks: before a message reaches the receiving program, the transport asks the receiver
what it expects now (:meth:`Peer.expect`, from the peer's own state, never from the message): the
phase, kind, protection, the peers allowed to send it and its size. A message that differs — a
round out of order, a sender that is not a sampled neighbour, a wrong size — is an
:class:`~fedgraphrec.crypto.errors.IntegrityError` naming the phase and the two peers.

Deployment. This transport is in process only. A Flower deployment of a serverless protocol could
keep the peer programs unchanged and run them on SuperNodes, with a *relay* ServerApp that carries
no protocol logic: each round it collects every peer's outbox (sealed peer messages, each bound to
its sender and receiver, under pairwise link keys agreed with X25519 between neighbours) and
delivers each message to its receiver's SuperNode; the relay sees only ciphertexts, sizes and
routing, as an untrusted network would, and the binding makes a re-routed, replayed or altered
message fail at the receiver. (Peers that may talk directly — Flower has no peer-to-peer links —
would use the same messages over their own channels.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import numpy as np
import torch

from fedgraphrec.crypto.aead import ciphertext_size
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.codec import decode_tensor, encode_tensor
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.sealing import Binding, GroupChannel, party
from fedgraphrec.runtime.transcript import Received

__all__ = ["Peer", "PeerExpect", "PeerMessage", "PeerProtection", "PeerTransport"]

PeerProtection = Literal["plain", "sealed"]


@dataclass(frozen=True, slots=True)
class PeerMessage:
    """One message from one peer to another.

    Attributes:
        phase: protocol phase (same names in code, ledger and transcripts).
        kind: what the payload is, for transcripts and audits (``"one_bit_gradient"``, ...).
        sender: the sending peer's id.
        receiver: the receiving peer's id.
        payload: the content: a tensor or an array (``sealed``: encoded with the tensor codec) or
            ``bytes``; while a sealed message travels it is the ciphertext.
        size: bytes of the plaintext message on the wire (the ledger books the ciphertext size of
            a sealed one).
        tag: a public number carried with the payload (e.g. DGREC's random message id; counted in
            ``size`` by the protocol), ``-1`` when unused.
        protection: ``plain`` (the receiver, and anyone on the path, may read it) or ``sealed``.
    """

    phase: str
    kind: str
    sender: int
    receiver: int
    payload: Any
    size: int
    tag: int = -1
    protection: PeerProtection = "plain"


@dataclass(frozen=True)
class PeerExpect:
    """What a peer accepts next, from its own state (fields left ``None`` are not constrained).

    Attributes:
        phase: the phase the message must carry (a sealed one is opened with this phase bound).
        kind: the payload kind.
        protection: the protection the message must have.
        senders: the peers allowed to send it (e.g. the receiver's sampled neighbours).
        size: the plaintext size in bytes.
        blobs: a sealed payload is ``bytes`` (otherwise a tensor, decoded with the tensor codec).
    """

    phase: str
    kind: str | None = None
    protection: PeerProtection = "plain"
    senders: frozenset[int] | None = None
    size: int | None = None
    blobs: bool = False


class Peer(Protocol):
    """A peer program, as the transport sees it."""

    def expect(self, step: int) -> PeerExpect | None:
        """What this peer accepts now (``None``: nothing; any message is refused)."""
        ...

    def receive(self, message: PeerMessage, step: int) -> None:
        """Take one checked (and opened) message; the program checks the content itself."""
        ...

    def link_key(self, other: int) -> SharedKey | None:
        """The key of this peer's link to ``other`` (``None``: none agreed, or ``accounted`` mode)."""
        ...


class PeerTransport:
    """Carries messages between in-process peer programs (module docstring).

    Args:
        net: the run's bookkeeping: ledger, transcripts, crypto mode, protocol name, step, adversary.
        role: the role name of every peer (ledger and transcript rows; ``"user"`` for DGREC).
    """

    def __init__(self, net: Network, role: str = "user") -> None:
        self.net = net
        self.role = role
        self.peers: dict[int, Peer] = {}

    def register(self, ident: int, peer: Peer) -> None:
        """Make ``peer`` reachable as peer ``ident`` (a later registration replaces it)."""
        self.peers[int(ident)] = peer

    def send(self, messages: Sequence[PeerMessage]) -> None:
        """Book, seal, check and deliver one batch of messages of one phase, kind and protection.

        Raises:
            ValueError: the batch mixes phases, kinds or protections, or names an unknown peer.
            IntegrityError: a receiver refused a message (module docstring, "Node-side checks").
        """
        if not messages:
            return
        first = messages[0]
        if any(
            (m.phase, m.kind, m.protection) != (first.phase, first.kind, first.protection) for m in messages
        ):
            raise ValueError(f"{first.phase}: one batch carries messages of one phase, kind and protection")
        missing = {m.receiver for m in messages if m.receiver not in self.peers}
        missing |= {m.sender for m in messages if m.sender not in self.peers}
        if missing:
            raise ValueError(f"{first.phase}: unknown peer(s) {sorted(missing)[:5]}")
        sealed = first.protection == "sealed"
        real = sealed and self.net.real_for(first.phase)
        wire = [self._seal(m) for m in messages] if real else list(messages)
        if real and self.net.adversary is not None:
            altered = self.net.adversary.forward(
                first.phase,
                self.net.step,
                [m.payload for m in wire],
                np.asarray([m.receiver for m in wire], dtype=np.int64),
            )
            wire = [replace(m, payload=p) for m, p in zip(wire, altered, strict=True)]
        self._book(first, wire, sealed)
        for m in wire:
            self._deliver(m, real)

    # ------------------------------------------------------------------ bookkeeping
    def _book(self, first: PeerMessage, wire: list[PeerMessage], sealed: bool) -> None:
        net = self.net
        sizes = np.fromiter(
            (ciphertext_size(m.size) if sealed else m.size for m in wire), dtype=np.int64, count=len(wire)
        )
        senders = np.fromiter((m.sender for m in wire), dtype=np.int64, count=len(wire))
        receivers = np.fromiter((m.receiver for m in wire), dtype=np.int64, count=len(wire))
        net.ledger.record(first.phase, self.role, self.role, sizes, senders=senders, receivers=receivers)
        if net.transcript.enabled:
            net.transcript.add(
                self.role,
                Received(
                    first.phase,
                    self.role,
                    first.kind,
                    sealed,
                    [m.payload for m in wire],
                    receivers.tolist(),
                    senders.tolist(),
                    step=net.step,
                    sizes=sizes.tolist(),
                    protection=first.protection,
                ),
            )

    # ------------------------------------------------------------------ sealing
    def _channel(self, owner: int, other: int, phase: str) -> GroupChannel:
        key = self.peers[owner].link_key(other)
        if key is None:
            raise RuntimeError(
                f"{phase}: real crypto mode but {party(self.role, owner)} has no key for its link to "
                f"{party(self.role, other)}"
            )
        return GroupChannel(key, self.net.protocol or "protocol", purpose="peer")

    def _seal(self, m: PeerMessage) -> PeerMessage:
        """The sender's side: the message as a ciphertext bound to where it belongs."""
        b = Binding(self.net.protocol, m.phase, self.net.step)
        plain = m.payload if isinstance(m.payload, bytes) else encode_tensor(_as_tensor(m.payload))
        aad = b.aad(party(self.role, m.sender), party(self.role, m.receiver))
        (blob,) = self._channel(m.sender, m.receiver, m.phase).seal(b, [plain], [aad])
        return replace(m, payload=blob)

    def _deliver(self, m: PeerMessage, real: bool) -> None:
        """The receiver's side: check against its own expectation, open, hand over."""
        peer = self.peers[m.receiver]
        step = self.net.step
        exp = peer.expect(step)
        if exp is None:
            who = f"from {party(self.role, m.sender)} to {party(self.role, m.receiver)}"
            raise IntegrityError(f"{m.phase} (step {step}): the message {who} was not expected at all")
        if (
            m.phase == exp.phase
            and m.protection == exp.protection
            and (exp.kind is None or m.kind == exp.kind)
            and (exp.size is None or m.size == exp.size)
            and (exp.senders is None or m.sender in exp.senders)
        ):
            pass  # the common case: everything as expected
        else:
            who = f"from {party(self.role, m.sender)} to {party(self.role, m.receiver)}"
            wrong = ", ".join(self._differences(m, exp))
            raise IntegrityError(f"{exp.phase} (step {step}): the message {who} has {wrong}")
        if real:
            b = Binding(self.net.protocol, exp.phase, step)
            sender, receiver = party(self.role, m.sender), party(self.role, m.receiver)
            channel = self._channel(m.receiver, m.sender, exp.phase)
            (opened,) = channel.open(b, [m.payload], [b.aad(sender, receiver)], [sender], [receiver])
            m = replace(m, payload=opened if exp.blobs else decode_tensor(opened))
        peer.receive(m, step)

    @staticmethod
    def _differences(m: PeerMessage, exp: PeerExpect) -> list[str]:
        """What in ``m`` differs from the receiver's expectation, in words."""
        wrong = [
            f"{name} {got!r} (expected {want!r})"
            for name, got, want in (
                ("phase", m.phase, exp.phase),
                ("kind", m.kind, exp.kind),
                ("protection", m.protection, exp.protection),
                ("size", m.size, exp.size),
            )
            if want is not None and got != want
        ]
        if exp.senders is not None and m.sender not in exp.senders:
            wrong.append("a sender that is not one of the receiver's expected peers")
        return wrong


def _as_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach().contiguous()
    return torch.from_numpy(np.ascontiguousarray(value))
