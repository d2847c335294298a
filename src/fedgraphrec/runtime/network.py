"""The state under every transport: the ledger, the transcripts, the crypto mode and the group key.

Role programs never call each other directly: they talk through a
:class:`~fedgraphrec.runtime.transport.Transport` (or DGREC's
:class:`~fedgraphrec.runtime.peer.PeerTransport`), which books every message in this object's
:class:`~.ledger.Ledger` and, when transcripts are on, keeps what the receiving role got. Messages
that must stay secret from the relaying server are sealed and opened here (:meth:`Network.seal`,
:meth:`Network.open`) under the clients' group key, bound to protocol, phase, step, sender and
receiver (:mod:`~fedgraphrec.runtime.sealing`), so a protocol never handles a cipher or an
associated-data string. (There is no second message path: a transport is the only sender.)

Every message declares its :data:`~fedgraphrec.runtime.part.Protection`:

- ``plain`` — the receiver (and the relaying server) may read it;
- ``sealed`` — AEAD under a key the server lacks; in ``real`` mode the payloads must be
  ciphertexts from :meth:`Network.seal` and the receiver opens them with :meth:`Network.open`;
- ``pseudonymous`` — item tokens (keyed HMACs): the server handles them by design without
  learning the item ids;
- ``masked`` — secret-shared or masked values whose sum only is meaningful;
- ``asymmetric`` — sealed by the sending program to one receiver's public key (key wrapping,
  LP-GCN's verification answers); the transport carries the ciphertext as it is;
- ``homomorphic`` — homomorphic ciphertexts (P4GCN).

In crypto mode ``real`` a protected message without its payload is an error: nothing is merely
counted as if it were protected. In mode ``accounted`` the cipher is skipped and sizes come from
the exact ciphertext-size formula, so both modes produce identical ledgers and identical numbers.

An *active* server is modelled by an :class:`Adversary` attached to the network: it sees, and may
alter, every sealed batch the server forwards (``sender == "server"``), before delivery. A
:class:`LyingAdversary` also lies about everything else the server says: part labels, fields, which
stages run when, and (Flower) the hello and the encoded records; both engines' transports call it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np

from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.runtime.sealing import Binding, GroupChannel
from fedgraphrec.runtime.transcript import Transcript

if TYPE_CHECKING:
    from fedgraphrec.runtime.message import Message
    from fedgraphrec.runtime.part import Part

__all__ = ["Adversary", "CryptoMode", "LyingAdversary", "Network"]

CryptoMode = Literal["real", "accounted"]


class Adversary(Protocol):
    """An active server: may alter the protected batches it forwards before they are delivered."""

    def forward(
        self, phase: str, step: int, payloads: list[Any], receivers: np.ndarray | None
    ) -> list[Any | None]:
        """The payloads as delivered (same length; ``None`` where a message is dropped)."""
        ...


@runtime_checkable
class LyingAdversary(Adversary, Protocol):
    """A server that lies about more than payloads: labels, stages, parameters, the session, records.

    The transports call these hooks (on top of :meth:`Adversary.forward`) when the attached
    adversary has them (integrity audits, ``fedgraphrec.attacks.lying_server``):

    * :meth:`schedule` — once per :meth:`Transport.round <fedgraphrec.runtime.transport.Transport.round>`,
      before anything is sent: the rounds actually delivered, in order (e.g. the same stage twice, or
      a set-up stage injected at a later step); the caller gets the replies of the last one;
    * :meth:`tamper` — every part the server sends to a node (any protection): the part delivered
      in its place (relabelled, replaced by another phase's ciphertexts, ...);
    * :meth:`tamper_fields` — a request's public fields (e.g. a lowered secure-aggregation threshold);
    * :meth:`observe_reply` — every reply, before the server books it (what a lying server learns);
    * Flower engine only: :meth:`hello` (the hello record attached to a request) and
      :meth:`tamper_records` (the encoded ``RecordDict`` of a request, for malformed records).
    """

    def schedule(
        self, stage: str, step: int, requests: Mapping[int, Message]
    ) -> list[tuple[str, Mapping[int, Message]]]:
        """The rounds to deliver for the server program's round ``(stage, requests)``."""
        ...

    def tamper(self, stage: str, node: int, name: str, part: Part, step: int) -> Part:
        """The part delivered as ``name`` to ``node`` in ``stage`` (``part`` when left alone)."""
        ...

    def tamper_fields(self, stage: str, node: int, fields: dict[str, Any], step: int) -> dict[str, Any]:
        """The request's public fields as delivered."""
        ...

    def observe_reply(self, stage: str, node: int, reply: Message, step: int) -> None:
        """A node's reply, as the server receives it (before any check of the server's own)."""
        ...

    def hello(
        self,
        stage: str,
        node: int,
        step: int,
        pending: Mapping[str, Any] | None,
        original: Mapping[str, Any] | None,
    ) -> Mapping[str, Any] | None:
        """Flower: the hello attached to this request (``pending``: the honest one, if any is due)."""
        ...

    def tamper_records(self, stage: str, node: int, content: Any, step: int) -> Any:
        """Flower: the encoded request (a ``RecordDict``) as delivered."""
        ...


_CLIENT_ROLES = ("client", "conv-client", "key-client", "user")


def _client_ids(names: Sequence[str]) -> np.ndarray:
    """Client ids of party names such as ``client:3`` (-1 for the server, items and multicast names)."""
    out = np.full(len(names), -1, dtype=np.int64)
    for k, name in enumerate(names):
        role, _, ident = name.partition(":")
        if role in _CLIENT_ROLES and ident.isdigit():
            out[k] = int(ident)
    return out


class Network:
    """In-process transport with a ledger, optional transcripts, and sealing under the group key.

    Args:
        n_clients: size of the client id space (for per-client byte totals).
        crypto: ``"real"`` or ``"accounted"``.
        transcripts: keep what each role received.
        protocol: protocol name bound into every sealed message.
    """

    def __init__(
        self, n_clients: int, crypto: CryptoMode = "accounted", transcripts: bool = False, protocol: str = ""
    ) -> None:
        if crypto not in ("real", "accounted"):
            raise ValueError(f"crypto mode must be 'real' or 'accounted', got {crypto!r}")
        self.crypto: CryptoMode = crypto
        self.protocol = protocol
        self.ledger = Ledger(n_clients)
        self.transcript = Transcript(enabled=transcripts)
        self.step = -1
        self.channel: GroupChannel | None = None
        self.adversary: Adversary | None = None
        self.sealed_count = 0
        self.opened_count = 0
        self.real_phases: tuple[str, ...] | None = None
        """In ``real`` mode, the phase prefixes whose messages are enciphered (``None``: every phase).

        An attack driver narrows it to the phase it reads, so that the other phases (e.g. P-GCN's
        forward sums over every user) run as ``accounted``: the same numbers and bytes, no cipher."""

    @property
    def real(self) -> bool:
        """Whether protected payloads are encrypted for real."""
        return self.crypto == "real"

    def real_for(self, phase: str) -> bool:
        """Whether the messages of ``phase`` are encrypted for real (:attr:`real_phases`)."""
        return self.real and (self.real_phases is None or phase.startswith(self.real_phases))

    def begin_step(self, step: int) -> None:
        """Every message from now on belongs to protocol step ``step`` (bound into sealed messages)."""
        self.step = int(step)

    def use_group_key(self, key: SharedKey | None) -> None:
        """Seal and open with the clients' shared key (``None`` in ``accounted`` mode)."""
        self.channel = None if key is None else GroupChannel(key, self.protocol or "protocol")

    def binding(self, phase: str) -> Binding:
        """The binding of messages of ``phase`` at the current step."""
        return Binding(self.protocol, phase, self.step)

    def seal(
        self, phase: str, plaintexts: Sequence[bytes], senders: Sequence[str], receivers: Sequence[str]
    ) -> list[bytes] | None:
        """Seal each plaintext from ``senders[k]`` to ``receivers[k]``; ``None`` in ``accounted`` mode.

        Raises:
            RuntimeError: ``real`` mode without a group key (:meth:`use_group_key`).
        """
        if not self.real:
            return None
        if self.channel is None:
            raise RuntimeError(f"{phase}: real crypto mode but no group key was agreed (use_group_key)")
        b = self.binding(phase)
        self.sealed_count += len(plaintexts)
        t0 = time.perf_counter()
        sealed = self.channel.seal(b, plaintexts, b.aads(senders, receivers))
        self.ledger.charge_crypto(_client_ids(senders), time.perf_counter() - t0)
        return sealed

    def open(
        self,
        phase: str,
        blobs: Sequence[bytes | None],
        senders: Sequence[str],
        receivers: Sequence[str],
        delivered_to: Sequence[str] | None = None,
    ) -> list[bytes]:
        """Open what each receiver got, checking it came from ``senders[k]`` for ``receivers[k]``.

        ``receivers`` are the names bound at sealing (a multicast name for fanned-out copies);
        ``delivered_to`` names the parties that actually received them, for error messages.

        Raises:
            IntegrityError: a message is missing, tampered, replayed or re-routed.
        """
        if self.channel is None:
            raise RuntimeError(f"{phase}: nothing to open without a group key")
        b = self.binding(phase)
        names = receivers if delivered_to is None else delivered_to
        t0 = time.perf_counter()
        out = self.channel.open(b, blobs, b.aads(senders, receivers), senders, names)
        self.ledger.charge_crypto(_client_ids(names), time.perf_counter() - t0)
        self.opened_count += len(out)
        return out
