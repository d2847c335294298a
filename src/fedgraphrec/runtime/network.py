"""The one interface protocols use to transmit: records the ledger and transcripts.

Role programs never call each other directly; each transmission batch goes through
:meth:`Network.transmit`, which counts messages and bytes in the :class:`~.ledger.Ledger` and, when
transcripts are on, keeps what the receiving role got. In crypto mode ``real`` payloads are the
actual ciphertext bytes and sizes are their lengths; in mode ``accounted`` the cipher is skipped and
sizes come from the exact ciphertext-size formula, so both modes produce identical ledgers and
identical numbers.

The in-process engine delivers by returning the payloads; an engine that crosses processes (Flower)
implements the same method by sending them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.runtime.transcript import Received, Transcript

__all__ = ["CryptoMode", "Network"]

CryptoMode = Literal["real", "accounted"]


class Network:
    """In-process transport with a ledger and optional transcripts.

    Args:
        n_clients: size of the client id space (for per-client byte totals).
        crypto: ``"real"`` or ``"accounted"``.
        transcripts: keep what each role received.
    """

    def __init__(self, n_clients: int, crypto: CryptoMode = "accounted", transcripts: bool = False) -> None:
        if crypto not in ("real", "accounted"):
            raise ValueError(f"crypto mode must be 'real' or 'accounted', got {crypto!r}")
        self.crypto: CryptoMode = crypto
        self.ledger = Ledger(n_clients)
        self.transcript = Transcript(enabled=transcripts)

    @property
    def real(self) -> bool:
        """Whether protected payloads are encrypted for real."""
        return self.crypto == "real"

    def transmit(
        self,
        phase: str,
        sender: str,
        receiver: str,
        sizes: np.ndarray | Sequence[int] | int,
        *,
        kind: str,
        protected: bool,
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
            protected: whether the payloads are encrypted for the receiver's eyes only (or for
                parties other than the receiver).
            payloads: the payload objects (required for transcripts to be meaningful).
            senders: client id of each message's sender, when the sender is a client role.
            receivers: client id of each message's receiver, when the receiver is a client role.
            count: with an integer ``sizes``, the number of messages of that size.
            repeat: each listed message stands for ``repeat`` equal messages (ledger only).
        """
        if count is None:
            sizes = np.atleast_1d(np.asarray(sizes, dtype=np.int64))
        n_msgs = count if count is not None else len(sizes)  # type: ignore[arg-type]
        if payloads is not None and len(payloads) != n_msgs:
            raise ValueError(f"{phase}: {len(payloads)} payloads for {n_msgs} message sizes")
        self.ledger.record(
            phase, sender, receiver, sizes, senders=senders, receivers=receivers, count=count, repeat=repeat
        )
        if self.transcript.enabled and payloads is not None:
            recv = None if receivers is None else [int(r) for r in np.asarray(receivers)]
            sent = None if senders is None else [int(r) for r in np.asarray(senders)]
            self.transcript.add(
                receiver, Received(phase, sender, kind, protected, list(payloads), recv, sent)
            )
        return payloads
