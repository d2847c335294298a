"""The peer-to-peer transport: one ledger booking per message, transcripts, sealing and the node checks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.aead import ciphertext_size
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.codec import encoded_size
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.peer import PeerExpect, PeerMessage, PeerTransport


class Toy:
    """A peer that accepts ``phase`` from ``senders`` and keeps what it got."""

    def __init__(self, keys: dict[int, SharedKey], senders: frozenset[int], protection: Any) -> None:
        self.keys, self.got = keys, []  # type: ignore[var-annotated]
        self.exp = PeerExpect("p", "row", protection, senders, encoded_size((3,), torch.float64))

    def expect(self, step: int) -> PeerExpect | None:
        return self.exp

    def receive(self, message: PeerMessage, step: int) -> None:
        self.got.append(message)

    def link_key(self, other: int) -> SharedKey | None:
        return self.keys.get(other)


def _ring(crypto: str, protection: Any) -> tuple[PeerTransport, dict[int, Toy]]:
    net = Network(3, crypto, transcripts=True, protocol="toy")  # type: ignore[arg-type]
    link = {frozenset(p): SharedKey.generate() for p in ((0, 1), (1, 2), (0, 2))}
    t = PeerTransport(net)
    peers = {}
    for u in range(3):
        keys = {v: link[frozenset((u, v))] for v in range(3) if v != u}
        peers[u] = Toy(keys, frozenset({(u - 1) % 3}), protection)
        t.register(u, peers[u])
    return t, peers


def _send(t: PeerTransport, protection: Any) -> None:
    size = encoded_size((3,), torch.float64)
    t.send([PeerMessage("p", "row", u, (u + 1) % 3, torch.full((3,), float(u), dtype=torch.float64), size,
                        protection=protection) for u in range(3)])  # fmt: skip


@pytest.mark.parametrize("crypto", ["real", "accounted"])
def test_sealed_messages_are_booked_once_recorded_and_opened(crypto: str) -> None:
    t, peers = _ring(crypto, "sealed")
    t.net.begin_step(4)
    _send(t, "sealed")
    size = ciphertext_size(encoded_size((3,), torch.float64))
    assert t.net.ledger.total_messages() == 3 and t.net.ledger.total_bytes() == 3 * size  # both modes
    assert t.net.ledger.client_received.tolist() == [size] * 3
    (entry,) = t.net.transcript.of("user")
    assert entry.senders == [0, 1, 2] and entry.receivers == [1, 2, 0] and entry.step == 4
    if crypto == "real":
        assert all(isinstance(p, bytes) and len(p) == size for p in entry.payloads)
    for u in range(3):
        (m,) = peers[(u + 1) % 3].got
        assert m.sender == u and torch.equal(m.payload, torch.full((3,), float(u), dtype=torch.float64))


def test_a_tampered_or_rerouted_sealed_message_is_refused() -> None:
    class Flip:
        def forward(
            self, phase: str, step: int, payloads: list[Any], receivers: np.ndarray | None
        ) -> list[Any | None]:
            blob = bytearray(payloads[1])
            blob[-1] ^= 1
            return [payloads[0], bytes(blob), payloads[2]]

    t, _ = _ring("real", "sealed")
    t.net.adversary = Flip()
    with pytest.raises(IntegrityError, match=r"user:1 to user:2.*failed authentication"):
        _send(t, "sealed")
    t, peers = _ring("real", "sealed")
    peers[2].exp = PeerExpect("p", "row", "sealed", frozenset({0, 1}), None)
    size = encoded_size((3,), torch.float64)
    sealed = t._seal(
        PeerMessage("p", "row", 0, 1, torch.zeros(3, dtype=torch.float64), size, protection="sealed")
    )
    with pytest.raises(IntegrityError, match="failed authentication"):  # 0→1's ciphertext delivered to 2
        t._deliver(PeerMessage("p", "row", 0, 2, sealed.payload, size, protection="sealed"), real=True)


def test_the_receiver_checks_sender_phase_size_and_protection() -> None:
    t, peers = _ring("accounted", "plain")
    size = encoded_size((3,), torch.float64)
    x = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(IntegrityError, match="not one of the receiver's expected peers"):
        t.send([PeerMessage("p", "row", 2, 1, x, size)])  # 1 expects 0 only
    with pytest.raises(IntegrityError, match="phase 'q'"):
        t.send([PeerMessage("q", "row", 0, 1, x, size)])
    with pytest.raises(IntegrityError, match="size"):
        t.send([PeerMessage("p", "row", 0, 1, x, size + 1)])
    with pytest.raises(IntegrityError, match="protection 'sealed'"):
        t.send([PeerMessage("p", "row", 0, 1, x, size, protection="sealed")])
    assert not any(p.got for p in peers.values())
