"""Secure aggregation as transport rounds: exact sums, dropouts, byte counts, lost nodes, attacks.

A toy protocol whose clients' inputs are fixed vectors runs :func:`secure_sum` over one or three
in-process nodes, in both crypto modes: the sum is the exact fixed-point sum of the included
clients' inputs (with clients dropping before or after uploading), a stage below the threshold
aborts, and the ledger (the one byte count) books what ``real`` mode serializes, in both modes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pytest
import torch

from fedgraphrec.attacks.active_server import ATTACKS, ActiveServer
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.fixed_point import FixedPoint
from fedgraphrec.crypto.secagg.wire import (
    ADVERTISE_BYTES,
    ID_BYTES,
    SHARE_MESSAGE_BYTES,
    UNMASK_ENTRY_BYTES,
    SecAggAbortError,
)
from fedgraphrec.protocols.base import ClientProgram, NodeData, shard_of
from fedgraphrec.protocols.secagg.client import SecAggState, SecureSumClient
from fedgraphrec.protocols.secagg.expect import merge_edges, sum_edges, sum_expectation, sum_repeats
from fedgraphrec.protocols.secagg.roles import ADVERTISE, PLAIN
from fedgraphrec.protocols.secagg.server import plain_sum, secure_sum
from fedgraphrec.protocols.secagg.upload import SparseUpload
from fedgraphrec.runtime.expect import Expectation, StageFlow, flow
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.part import Part

N, L, FRAC = 9, 6, 40


TOY_FLOW = flow(
    first=[ADVERTISE, PLAIN],
    after=merge_edges(sum_edges([], [ADVERTISE, PLAIN]), sum_edges([], [ADVERTISE, PLAIN], secure=False)),
    new_step=[ADVERTISE, PLAIN],
    repeats={**sum_repeats(1), **sum_repeats(1, secure=False)},
)
"""Secure sums (or the plain baseline) one after another, one per step: what these tests run."""


@dataclass
class ToyState:
    secagg: SecAggState = field(default_factory=SecAggState)
    included: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


class ToyClient(SecureSumClient, ClientProgram[ToyState]):
    """Client u's input is row u of ``settings["x"]`` (sparse: its nonzero entries).

    Its own policy accepts the tests' ``t = 5`` of ``n = 9`` (``secagg_threshold = 0.55``).
    """

    def __init__(self, settings: Any, clients: np.ndarray, data: NodeData | None) -> None:
        super().__init__({"secagg_threshold": 0.55, **settings}, clients, data)
        self.state = ToyState()

    def stage_flow(self) -> StageFlow:
        return TOY_FLOW

    def expect(self, stage: str) -> Expectation:
        return sum_expectation(stage, "toy/up")

    def secagg_input(self, session: str) -> SparseUpload:
        x = self.settings["x"][torch.from_numpy(self.clients)]
        pos, idx = torch.nonzero(x, as_tuple=True)
        up = SparseUpload(self.clients, L)
        up.add(pos, idx, x[pos, idx])
        return up

    def secagg_offline(self, session: str, when: Literal["before", "after"]) -> np.ndarray:
        return np.intersect1d(self.clients, self.settings.get(when, []))

    def secagg_included(self, session: str, included: np.ndarray) -> None:
        self.state.included = included


class CrashingTransport(LocalTransport):
    """A node stops answering when a given stage arrives (a crashed SuperNode)."""

    crash: tuple[str, int] | None = None

    def round(self, stage: str, requests: Any, *, allow_loss: bool = False) -> dict[int, Message]:
        if self.crash is not None and self.crash[0] == stage:
            self.lost.add(self.crash[1])
        return super().round(stage, requests, allow_loss=allow_loss)


def _inputs(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, L, generator=g, dtype=torch.float64)
    return x * (torch.rand(N, L, generator=g) < 0.6)  # sparse rows


def _run(crypto: str, nodes: int, threshold: int = 5, crash: tuple[str, int] | None = None, **settings: Any):
    net = Network(N, crypto=crypto, transcripts=True, protocol="toy")  # type: ignore[arg-type]
    x = settings.pop("x", _inputs())
    shards = shard_of(N, list(range(nodes)))
    programs = {k: ToyClient({"x": x, **settings}, ids, None) for k, ids in shards.items()}
    transport = CrashingTransport(net, programs)
    transport.crash = crash
    net.begin_step(0)
    result = secure_sum(
        transport, phase="toy/up", session="toy/0", participants=shards, length=L, threshold=threshold,
        frac_bits=FRAC,
    )  # fmt: skip
    return result, net, programs, x


def _exact(x: torch.Tensor, summed: list[int]) -> torch.Tensor:
    """The exact sum of the fixed-point encodings of the ``summed`` clients' rows, decoded."""
    enc = torch.round(x[summed] * 2.0**FRAC).to(torch.int64).sum(0)
    return torch.ldexp(enc.to(torch.float64), torch.tensor(-FRAC, dtype=torch.float64))


DROPOUTS = [([], []), ([], [1, 4, 6]), ([0, 3, 8], []), ([2], [5, 7])]
"""(offline before uploading, offline after uploading): none, 3 of 9 after, 3 of 9 before, both."""


@pytest.mark.parametrize("nodes", [1, 3])
@pytest.mark.parametrize("crypto", ["accounted", "real"])
@pytest.mark.parametrize(("before", "after"), DROPOUTS)
def test_the_sum_is_exact_with_clients_dropping_before_or_after_uploading(
    crypto: str, nodes: int, before: list[int], after: list[int]
) -> None:
    result, _, programs, x = _run(crypto, nodes, before=before, after=after)
    summed = [u for u in range(N) if u not in before]  # dropped after uploading: still summed
    assert torch.equal(result.total, _exact(x, summed))  # the fixed-point sum is exact: bit-identical
    assert result.included.tolist() == summed
    assert result.dropped.tolist() == before and result.unresponsive.tolist() == after
    included = np.sort(np.concatenate([p.state.included for p in programs.values()]))
    assert included.tolist() == result.included.tolist()


@pytest.mark.parametrize("nodes", [1, 3])
def test_the_ledger_books_the_serialized_messages_and_accounted_mode_books_the_same(nodes: int) -> None:
    """One byte count: the ledger. In ``real`` mode it books each message's serialized length (and
    the sizes of :mod:`fedgraphrec.crypto.secagg.wire`); ``accounted`` mode books the same rows."""
    before, after = [2], [5, 7]
    _, real, _, _ = _run("real", nodes, before=before, after=after)
    _, accounted, _, _ = _run("accounted", nodes, before=before, after=after)
    size = {"advertise-keys": ADVERTISE_BYTES, "share-keys": SHARE_MESSAGE_BYTES, "masked-input": 8 * L}
    u2, u3 = N, N - len(before)
    size_down = {
        "advertise-keys": ADVERTISE_BYTES * N,
        "share-keys": SHARE_MESSAGE_BYTES,
        "unmask": ID_BYTES * u3,
    }
    booked: dict[tuple[str, str], int] = {}
    for role in ("server", "client"):
        for e in real.transcript.of(role):
            lengths = [len(p) if isinstance(p, bytes) else np.asarray(p).nbytes for p in e.payloads]
            assert e.sizes is not None and list(e.sizes) == lengths, e.phase  # booked = serialized
            stage = e.kind.removeprefix("secagg-")
            want = (size if e.sender == "client" else size_down).get(stage, UNMASK_ENTRY_BYTES * u2)
            assert set(lengths) == {want}, (e.phase, e.sender)
            key = (e.phase, e.sender)
            booked[key] = booked.get(key, 0) + sum(lengths)
    rows = real.ledger.rows()
    assert {(r.phase, r.sender): r.payload_bytes for r in rows} == booked
    assert rows == accounted.ledger.rows()
    assert np.array_equal(real.ledger.client_sent, accounted.ledger.client_sent)
    assert np.array_equal(real.ledger.client_received, accounted.ledger.client_received)


@pytest.mark.parametrize("crypto", ["accounted", "real"])
@pytest.mark.parametrize(("stage", "dropped", "unresponsive"), [("secagg/mask", True, False),
                                                                 ("secagg/unmask", False, True)])  # fmt: skip
def test_a_node_lost_mid_round_drops_or_keeps_its_clients_and_the_sum_stays_exact(
    crypto: str, stage: str, dropped: bool, unresponsive: bool
) -> None:
    result, _, _, x = _run(crypto, 3, threshold=5, crash=(stage, 1))
    node1 = shard_of(N, [0, 1, 2])[1]
    summed = [u for u in range(N) if not (dropped and u in node1)]
    assert torch.equal(result.total, _exact(x, summed))
    assert result.included.tolist() == summed
    assert result.dropped.tolist() == (node1.tolist() if dropped else [])
    assert result.unresponsive.tolist() == (node1.tolist() if unresponsive else [])


@pytest.mark.parametrize("crypto", ["accounted", "real"])
@pytest.mark.parametrize(
    ("stage", "threshold", "offline"),
    [
        ("advertise-keys", 10, {}),  # 9 participants for t = 10: nothing is sent
        ("masked-input", 5, {"before": [0, 1, 2, 3, 4]}),  # 4 uploads
        ("unmask", 5, {"after": [0, 1, 2, 3, 4]}),  # 9 uploads, 4 answers to the unmask request
    ],
)
def test_too_few_clients_left_aborts(crypto: str, stage: str, threshold: int, offline: dict) -> None:
    left = "9" if stage == "advertise-keys" else "4"
    with pytest.raises(
        SecAggAbortError, match=f"at stage {stage}: only {left} clients left, below the threshold {threshold}"
    ):
        _run(crypto, 3, threshold=threshold, **offline)


def test_the_server_holds_only_masked_inputs_and_forwards_shares_unchanged() -> None:
    _, net, _, _ = _run("real", 3)
    got = net.transcript.of("server")
    masked = [y for e in got if e.kind == "secagg-masked-input" for y in e.payloads]
    assert len(masked) == N and all(np.asarray(y).dtype == np.uint64 for y in masked)
    plain = FixedPoint(FRAC).scale * 100
    near_zero = [np.minimum(y, np.uint64(0) - y) < np.uint64(plain) for y in masked]
    assert np.mean(near_zero) < 0.05  # no small fixed-point numbers: every entry is masked
    up = {b for e in got if e.kind == "secagg-share-keys" for b in e.payloads}
    down = {b for e in net.transcript.of("client") if e.kind == "secagg-share-keys" for b in e.payloads}
    assert up == down and len(up) == N * (N - 1)  # relayed as the clients sealed them, no second seal


def test_a_presealed_part_without_payload_is_refused_in_real_mode() -> None:
    net = Network(N, crypto="real", protocol="toy")
    transport = LocalTransport(net, {0: ToyClient({"x": _inputs()}, np.arange(N), None)})
    bare = Part("toy/up/secagg-share-keys", "secagg-share-keys", "server", "client", None, shape="blobs",
                protection="sealed", presealed=True, receivers=np.arange(N)).with_sizes(np.ones(N))  # fmt: skip
    with pytest.raises(ValueError, match="without payloads in real crypto mode"):
        transport.round("secagg/mask", {0: Message({"shares": bare})})


@pytest.mark.parametrize("attack", ATTACKS)
def test_an_active_server_altering_relayed_shares_is_caught(attack: str) -> None:
    adversary = ActiveServer(attack, "toy/up/secagg-share-keys", np.random.default_rng(0))
    net = Network(N, crypto="real", protocol="toy")
    net.adversary = adversary
    shards = shard_of(N, [0, 1, 2])
    transport = LocalTransport(net, {k: ToyClient({"x": _inputs()}, ids, None) for k, ids in shards.items()})
    with pytest.raises(IntegrityError):
        for step in range(3):
            net.begin_step(step)
            secure_sum(transport, phase="toy/up", session=f"toy/{step}", participants=shards, length=L,
                       threshold=5, frac_bits=FRAC)  # fmt: skip
    assert adversary.fired


def test_plain_sum_is_the_float_sum_and_the_server_sees_each_clients_rows() -> None:
    net = Network(N, crypto="accounted", transcripts=True, protocol="toy")
    x = _inputs()
    shards = shard_of(N, [0, 1])
    transport = LocalTransport(
        net, {k: ToyClient({"x": x, "before": [3]}, ids, None) for k, ids in shards.items()}
    )
    got = plain_sum(transport, phase="toy/up", session="toy/0", participants=shards, length=L)
    keep = torch.ones(N, dtype=torch.bool)
    keep[3] = False
    assert torch.allclose(got.total, x[keep].sum(0), rtol=0, atol=1e-15) and got.dropped.tolist() == [3]
    (entry, *_) = [e for e in net.transcript.of("server") if e.kind == "plain-upload"]
    first = int(entry.senders[0])  # type: ignore[index]
    rows = np.asarray(entry.payloads[0])
    assert np.array_equal(rows[:, 1], x[first][x[first] != 0].numpy())
