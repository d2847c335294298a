"""The one interface protocols use to transmit: ledger, transcripts, sealing and opening.

Role programs never call each other directly; each transmission batch goes through
:meth:`Network.transmit`, which counts messages and bytes in the :class:`~.ledger.Ledger` and, when
transcripts are on, keeps what the receiving role got. Messages that must stay secret from the
relaying server are sealed and opened by the network itself (:meth:`Network.seal`,
:meth:`Network.open`) under the clients' group key, bound to protocol, phase, step, sender and
receiver (:mod:`~fedgraphrec.runtime.sealing`), so a protocol never handles a cipher or an
associated-data string.

Every message declares its :data:`Protection`:

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
alter, every sealed batch the server forwards (``sender == "server"``), before delivery.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np

from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.runtime.sealing import Binding, GroupChannel
from fedgraphrec.runtime.transcript import Received, Transcript

__all__ = ["Adversary", "CryptoMode", "Network", "Protection"]

CryptoMode = Literal["real", "accounted"]
Protection = Literal["plain", "sealed", "pseudonymous", "masked", "homomorphic", "asymmetric"]
_PROTECTIONS = ("plain", "sealed", "pseudonymous", "masked", "homomorphic", "asymmetric")


class Adversary(Protocol):
    """An active server: may alter the protected batches it forwards before they are delivered."""

    def forward(
        self, phase: str, step: int, payloads: list[Any], receivers: np.ndarray | None
    ) -> list[Any | None]:
        """The payloads as delivered (same length; ``None`` where a message is dropped)."""
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

    def transmit(
        self,
        phase: str,
        sender: str,
        receiver: str,
        sizes: np.ndarray | Sequence[int] | int,
        *,
        kind: str,
        protected: bool | None = None,
        protection: Protection | None = None,
        payloads: Sequence[Any] | None = None,
        senders: np.ndarray | None = None,
        receivers: np.ndarray | None = None,
        count: int | None = None,
        repeat: int = 1,
    ) -> Sequence[Any] | None:
        """Send one batch of messages and return the payloads as delivered.

        Args:
            phase: protocol phase name (same names in code, ledger and logs).
            sender: sending role.
            receiver: receiving role.
            sizes: bytes of each message (or one int for a single message).
            kind: what the payloads are, for transcripts and audits.
            protected: legacy flag: ``True`` means ``protection="sealed"``, ``False`` ``"plain"``.
            protection: what protects the payloads from parties other than the receiver.
            payloads: the payload objects (required in ``real`` mode for protected messages).
            senders: client id of each message's sender, when the sender is a client role.
            receivers: client id of each message's receiver, when the receiver is a client role.
            count: with an integer ``sizes``, the number of messages of that size.
            repeat: each listed message stands for ``repeat`` equal messages (ledger only).

        Raises:
            ValueError: a protected message without payloads in ``real`` mode, or payloads and
                sizes that disagree.
        """
        prot = _protection(protected, protection, phase)
        if count is None:
            sizes = np.atleast_1d(np.asarray(sizes, dtype=np.int64))
        n_msgs = count if count is not None else len(sizes)  # type: ignore[arg-type]
        if payloads is not None and len(payloads) != n_msgs:
            raise ValueError(f"{phase}: {len(payloads)} payloads for {n_msgs} message sizes")
        if self.real and prot != "plain" and payloads is None and n_msgs:
            raise ValueError(
                f"{phase}: {n_msgs} {prot} message(s) from {sender} to {receiver} without payloads in real "
                "crypto mode; a protected message must carry its ciphertext, token or masked value"
            )
        self.ledger.record(
            phase, sender, receiver, sizes, senders=senders, receivers=receivers, count=count, repeat=repeat
        )
        if payloads is not None and prot == "sealed" and sender == "server" and self.adversary is not None:
            payloads = self.adversary.forward(phase, self.step, list(payloads), receivers)
        if self.transcript.enabled:
            recv = None if receivers is None else [int(r) for r in np.asarray(receivers)]
            sent = None if senders is None else [int(r) for r in np.asarray(senders)]
            each = (
                [int(np.asarray(sizes))] * n_msgs
                if count is not None
                else [int(x) for x in np.asarray(sizes)]
            )
            self.transcript.add(
                receiver,
                Received(
                    phase,
                    sender,
                    kind,
                    prot != "plain",
                    list(payloads) if payloads is not None else [],
                    recv,
                    sent,
                    step=self.step,
                    sizes=each,
                    protection=prot,
                ),
            )
        return payloads


def _protection(protected: bool | None, protection: Protection | None, phase: str) -> Protection:
    if protection is None:
        return "sealed" if protected else "plain"
    if protection not in _PROTECTIONS:
        raise ValueError(f"{phase}: protection must be one of {_PROTECTIONS}, got {protection!r}")
    if protected is not None and protected != (protection != "plain"):
        raise ValueError(f"{phase}: protected={protected} contradicts protection={protection!r}")
    return protection
