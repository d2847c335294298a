"""The transport: one round per stage, with ledger, transcripts, sealing and binding on the way.

A toy ring protocol (``tests/ring_protocol.py``) exercises it: every client seals its row to its
successor, the server forwards the ciphertexts, every client keeps what it received. Two nodes host
the clients.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.base import NodeData, shard_of
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.state import state_from_arrays, state_to_arrays
from fedgraphrec.runtime.transport import LostNodeError
from tests.helpers import count_replays
from tests.ring_protocol import RingClient, RingServer, RingState

N, D = 7, 3


def _ring(crypto: str, transcripts: bool = False) -> tuple[RingServer, dict[int, RingClient], torch.Tensor]:
    rows = torch.randn(N, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    data = NodeData(train=None, tables={"user_emb": rows})  # type: ignore[arg-type]
    programs = {k: RingClient(None, ids, data) for k, ids in shard_of(N, [0, 1]).items()}
    net = Network(N, crypto=crypto, transcripts=transcripts, protocol="ring")  # type: ignore[arg-type]
    server = RingServer(None, LocalTransport(net, programs), N, 0)
    server.setup()
    return server, programs, rows


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_each_client_gets_its_predecessors_row_and_both_modes_book_the_same_bytes(crypto: str) -> None:
    server, programs, rows = _ring(crypto)
    server.step(0)
    for p in programs.values():
        torch.testing.assert_close(p.state.got, rows[torch.from_numpy((p.clients - 1) % N)], rtol=0, atol=0)
    ledger = server.transport.net.ledger
    row_ct = 2 + 8 + D * 8 + 12 + 16  # codec header of (1, D), float64 data, nonce, tag
    assert ledger.bytes_between("client", "server", "ring/rows") == N * row_ct
    assert ledger.bytes_between("server", "client", "ring/rows") == N * row_ct
    assert (ledger.client_sent == row_ct).all() and (ledger.client_received == row_ct).all()


def test_the_server_holds_only_ciphertexts_in_real_mode() -> None:
    server, _, rows = _ring("real", transcripts=True)
    server.step(0)
    got = server.transport.net.transcript.of("server")
    entries = [e for e in got if e.phase == "ring/rows"]  # one per node
    payloads = [b for e in entries for b in e.payloads]
    assert all(e.protected for e in entries) and len(payloads) == N
    raw = {rows[u].numpy().tobytes() for u in range(N)}
    assert all(isinstance(b, bytes) and not any(r in b for r in raw) for b in payloads)


class _Replay:
    """An active server that delivers last step's ciphertexts again."""

    def __init__(self) -> None:
        self.seen: list[Any] | None = None

    def forward(self, phase: str, step: int, payloads: list[Any], receivers: np.ndarray | None) -> list[Any]:
        old, self.seen = self.seen, list(payloads)
        return old if old is not None and step > 0 else payloads


class _Swap:
    """An active server that swaps the first two messages it forwards (re-routing them)."""

    def forward(self, phase: str, step: int, payloads: list[Any], receivers: np.ndarray | None) -> list[Any]:
        out = list(payloads)
        if len(out) > 1:
            out[0], out[1] = out[1], out[0]
        return out


@pytest.mark.parametrize(("adversary", "match"), [(_Replay(), "step 1"), (_Swap(), "failed authentication")])
def test_replayed_and_rerouted_messages_are_rejected(adversary: Any, match: str) -> None:
    server, _, _ = _ring("real")
    server.transport.net.adversary = adversary
    if isinstance(adversary, _Replay):
        server.step(0)
    with pytest.raises(IntegrityError, match=match):
        server.step(len([1]) if isinstance(adversary, _Replay) else 0)


def test_a_node_refuses_to_go_back_to_an_earlier_step() -> None:
    server, _, _ = _ring("real")
    server.step(3)
    with pytest.raises(IntegrityError, match="step 2 after step 3"):
        server.step(2)


def test_a_sealed_part_without_ciphertexts_is_refused_in_real_mode() -> None:
    server, _, rows = _ring("real")
    bare = Part(
        "ring/rows", "user_embedding", "server", "client", rows, protection="sealed", receivers=np.arange(N)
    )
    with pytest.raises(ValueError, match="without payloads in real crypto mode"):
        server.transport.round("receive", {0: Message({"rows": bare})})


def test_a_lost_node_stops_the_round_unless_loss_is_allowed() -> None:
    server, _, _ = _ring("accounted")
    server.transport.lost.add(1)
    with pytest.raises(LostNodeError, match=r"\[1\]"):
        server.transport.round("send", {n: Message() for n in server.nodes})
    replies = server.transport.round("send", {n: Message() for n in server.nodes}, allow_loss=True)
    assert list(replies) == [0]


def test_client_state_survives_a_round_trip_through_arrays() -> None:
    _, programs, _ = _ring("real")
    state = programs[0].state
    back = state_from_arrays(RingState, state_to_arrays(state))
    assert torch.equal(back.rows, state.rows) and back.key == state.key and back.key is not None


@pytest.mark.parametrize("counts", [None, [2, 1, 3]])
def test_a_relay_of_every_message_in_order_is_the_part_itself_and_any_other_a_view(counts: Any) -> None:
    """Forwarding rows copies nothing: all messages in order keep the rows, others read a view."""
    rows = torch.arange(12.0).reshape(6, 2) if counts else torch.arange(6.0).reshape(3, 2)
    part = Part("fwd", "user_embedding", "client", "server", rows, senders=np.array([4, 5, 6]),
                counts=None if counts is None else np.array(counts))  # fmt: skip
    whole = part.forward(np.arange(3), np.array([1, 2, 3]))
    assert whole.value is rows and whole.index is None and torch.equal(whole.rows(), rows)
    assert list(whole.blocks()) and all(
        torch.equal(a, b) for a, b in zip(whole.blocks(), part.blocks(), strict=True)
    )
    some = part.forward(np.array([2, 0]), np.array([1, 2]))
    blocks = list(part.blocks())
    assert some.index is not None and torch.equal(some.rows(), torch.cat([blocks[2], blocks[0]]))
    if counts is not None:  # counts that do not add up to the rows are refused on either path
        bad = Part("fwd", "user_embedding", "client", "server", rows, senders=np.array([4, 5, 6]),
                   counts=np.array([2, 1, 2]))  # fmt: skip
        for pick in (np.arange(3), np.array([1])):
            with pytest.raises(ValueError, match="add up"):
                bad.forward(pick, np.ones(len(pick), dtype=np.int64))


def test_a_part_booked_like_an_earlier_one_is_booked_at_its_own_sizes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replaying a booked layout needs everything its ledger entry depends on to be the same.

    Parts share read-only id arrays but differ in one thing each (row width, dtype, counts,
    protection, repeat, phase, roles, the sizes a part in transit carries). Every one is booked at
    its own sizes, as a transport that recognises no layout books it, and the same part booked
    again is replayed.
    """
    ids = np.array([0, 2, 2, 5])
    counts = np.array([1, 2, 1, 3])
    other_counts = np.array([2, 2, 1, 3])
    sizes, other_sizes = np.array([9, 9, 9, 9]), np.array([9, 8, 9, 9])  # as a sealed part keeps them
    for a in (ids, counts, other_counts, sizes, other_sizes):
        a.flags.writeable = False

    def parts() -> list[Part]:
        rows = torch.zeros(7, 3)
        base = {"senders": ids, "counts": counts}
        return [
            Part("p", "k", "client", "server", rows, **base),
            Part("p", "k", "client", "server", torch.zeros(7, 4), **base),
            Part("p", "k", "client", "server", torch.zeros(7, 3, dtype=torch.float64), **base),
            Part("p", "k", "client", "server", rows, senders=ids, counts=other_counts),
            Part("p", "k", "client", "server", rows, protection="sealed", seal_to_role="client", **base),
            Part("p", "k", "client", "server", rows, repeat=3, **base),
            Part("q", "k", "client", "server", rows, **base),
            Part("p", "k", "server", "client", rows, receivers=ids, counts=counts),
            Part("p", "k", "server", "client", torch.zeros(4, 3), shape="broadcast", receivers=ids),
            Part("p", "k", "server", "client", torch.zeros(5, 3), shape="broadcast", receivers=ids),
            Part("p", "k", "client", "server", rows, **base).with_sizes(sizes),  # a part in transit
            Part("p", "k", "client", "server", rows, **base).with_sizes(other_sizes),
        ]

    full, fast = (LocalTransport(Network(N, crypto="accounted", protocol="t"), {}) for _ in range(2))
    replays = count_replays(fast.net.ledger, monkeypatch)
    for _ in range(3):
        for part in parts():
            fast._book(part)
        for part in parts():
            uniform = part.uniform_size()
            full.net.ledger.record(
                part.phase, part.sender_role, part.receiver_role, part.sizes() if uniform is None else uniform,
                senders=part.senders if part.sender_role != "server" else None,
                receivers=part.receivers if part.receiver_role != "server" else None,
                count=None if uniform is None else part.n_messages, repeat=part.repeat,
            )  # fmt: skip
    assert sum(replays) == 2 * len(parts())  # every layout after its first booking
    assert fast.net.ledger.rows() == full.net.ledger.rows()
    assert fast.net.ledger.client_sent.tolist() == full.net.ledger.client_sent.tolist()
    assert fast.net.ledger.client_received.tolist() == full.net.ledger.client_received.tolist()
